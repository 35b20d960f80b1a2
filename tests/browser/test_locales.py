"""The lesson in the learner's language, through each way of choosing it: the browser's
Accept-Language, the language menu (kept for the next visit), and `?lang=`; a checkpoint done
while reading a translation counts as the same checkpoint."""

from __future__ import annotations

from axe_playwright_python.sync_playwright import Axe

from .conftest import open_page, wait_until

LESSON = "/lessons/multi-head-attention"


def test_a_spanish_browser_reads_the_lesson_in_spanish_and_completes_a_checkpoint(browser, live):
    context = browser.new_context(locale="es-ES", viewport={"width": 1280, "height": 800})  # Accept-Language: es-ES
    page = context.new_page()
    open_page(page, live, LESSON)
    assert page.locator("html").get_attribute("lang") == "es"
    assert page.locator("#lesson-header h1").inner_text() == "Atención multicabeza"
    assert "Del ancho del modelo al ancho de la cabeza" in page.locator("#lesson-body").inner_text()
    assert page.locator("#lang").input_value() == "es"
    assert page.locator("#progress li").first.inner_text().startswith("Anota tu predicción")
    page.get_by_label("Your prediction").fill("Cada cabeza tiene 2 de ancho; se pierden las características 3-4.")
    page.get_by_role("button", name="Record prediction").click()
    wait_until(page, "(document.body.dataset.progress || '').split(',').includes('predict')", timeout=20)
    bad = [v["id"] for v in Axe().run(page).response["violations"] if v["impact"] in ("serious", "critical")]
    assert bad == []
    context.close()


def test_the_language_menu_switches_the_lesson_and_the_choice_is_kept(page, live):
    open_page(page, live, LESSON)
    assert page.locator("html").get_attribute("lang") == "en"
    page.get_by_label("Language").select_option("zh-CN")
    page.wait_for_url("**lang=zh-CN")
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("html").get_attribute("lang") == "zh-CN"
    assert page.locator("#lesson-header h1").inner_text() == "多头注意力"
    open_page(page, live, LESSON)  # the next visit, without ?lang=
    assert page.locator("#lesson-header h1").inner_text() == "多头注意力"
    assert page.locator("#lang").input_value() == "zh-CN"
    bad = [v["id"] for v in Axe().run(page).response["violations"] if v["impact"] in ("serious", "critical")]
    assert bad == []


def test_a_link_with_lang_opens_the_lesson_in_that_language_at_phone_width(page, live):
    page.set_viewport_size({"width": 390, "height": 844})
    open_page(page, live, LESSON + "?lang=es")
    assert page.locator("#lesson-header h1").inner_text() == "Atención multicabeza"
    assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") == 0
