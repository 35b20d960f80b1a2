// @ts-check
// The interface's words in the page's language. The server renders each page in the learner's
// locale (<html lang>) and names the page's catalog (<html data-catalog>): the words its scripts
// write, compiled by `make i18n` from the same gettext catalogs into
// /static/i18n/<locale>/<page>.json. In English the msgid is the text. Placeholders are {name};
// numbers people read go through `number` (a decimal comma in es), never into JSON.

export let locale = document.documentElement.lang || "en";

async function load(url = document.documentElement.dataset.catalog) {
  if (!url) return { messages: {} };
  try {
    const response = await fetch(url);
    return response.ok ? await response.json() : { messages: {} };
  } catch {
    return { messages: {} }; // offline before the catalog came: English rather than nothing
  }
}

let catalog = await load();
let plurals = new Intl.PluralRules(locale);

const fill = (text, values) =>
  text.replace(/\{(\w+)\}/g, (whole, key) => (key in values ? String(values[key]) : whole));

// Marks a string for extraction where it is declared; t() translates it where it is shown.
export const N_ = (text) => text;

export function t(msgid, values = {}) {
  const found = catalog.messages[msgid];
  return fill(typeof found === "string" && found ? found : msgid, values);
}

// The form for `count`: gettext's forms are in CLDR's order of categories for the locale
// (es: one, many, other; zh-CN: other), the catalog lists them, Intl.PluralRules names one.
export function tn(singular, plural, count, values = {}) {
  const forms = catalog.messages[singular];
  let text = count === 1 ? singular : plural;
  if (Array.isArray(forms) && forms.every(Boolean)) {
    const at = catalog.plural_categories.indexOf(plurals.select(count));
    text = forms[at >= 0 ? at : forms.length - 1];
  }
  return fill(text, { count, ...values });
}

// The locale's decimal mark, once: numbers are formatted by toFixed (fast: the workbench writes
// thousands) with that mark, which is what Intl.NumberFormat gives for our locales without
// grouping (Latin digits, "-" for minus); a locale with other digits would need Intl here.
let DECIMAL = ".";

// x with `digits` decimals as people read it here: "0.50" in English, "0,50" in Spanish.
export function number(x, digits = 2) {
  const text = (Object.is(x, -0) ? 0 : x).toFixed(digits);
  return DECIMAL === "." ? text : text.replace(".", DECIMAL);
}

// The language menu (every page): the server keeps the choice (?lang= sets the cookie); the
// page's hash, a workbench's state, is kept across the reload.
const menu = /** @type {HTMLSelectElement | null} */ (document.getElementById("lang"));
if (menu) {
  menu.addEventListener("change", () => {
    const url = new URL(location.href);
    url.searchParams.set("lang", menu.value);
    location.assign(url);
  });
}

// An exact number as people write it here, with the decimals it has and no more: "17", "1.875", "0,7".
// How the language strings sentences and a list's words together: Chinese sets no space after a full-width
// stop, and lists with 、 and ；.
let CJK = false;
export let gap = " "; // between two sentences
export const sentences = (...parts) => parts.filter(Boolean).join(gap);
export const listed = (words) => words.join(CJK ? "、" : ", ");
export const clauses = (parts) => parts.join(CJK ? "；" : "; ");

// A measured difference or factor in a sentence: `digits` significant digits in the page's language, a
// small one as 4,2·10⁻¹³ (never 4.2e-13, which reads as code).
const SUPER = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };
export function significant(x, digits = 3) {
  if (x === 0 || !Number.isFinite(x) || Math.abs(x) >= 1e-3) {
    return new Intl.NumberFormat(locale, { maximumSignificantDigits: digits }).format(x);
  }
  const [mantissa, exponent] = x.toExponential(digits - 1).split("e");
  const power = [...String(Number(exponent))].map((c) => SUPER[c]).join("");
  return `${number(Number(mantissa), digits - 1)}·10${power}`;
}

export const exact = (x) => new Intl.NumberFormat(locale, { maximumFractionDigits: 6 }).format(x);

// Between numbers in a vector: ", " unless the decimal mark is a comma ("[0,50; 1,20]").
export let separator = ", ";

// What follows from the page's language: its plural rules, decimal mark, spacing of sentences.
function settle() {
  plurals = new Intl.PluralRules(locale);
  DECIMAL = new Intl.NumberFormat(locale).formatToParts(0.5).find((p) => p.type === "decimal")?.value ?? ".";
  CJK = locale.startsWith("zh");
  gap = CJK ? "" : " "; // between two sentences
  separator = number(0.5).includes(",") ? "; " : ", ";
}
settle();

// The page in another of the offered languages from now on, without a reload (a lesson launched by an
// LMS learns its learner's language only once it holds a token it cannot fetch twice): the catalog of
// `page`'s scripts, the plural rules, the decimal mark, the spacing of sentences.
export async function useLanguage(tag, page) {
  catalog = tag === "en" ? { messages: {} } : await load(`/static/i18n/${tag}/${page}.json`);
  locale = tag;
  document.documentElement.lang = tag;
  settle();
}

// The languages the lessons are written in (the server's i18n.LOCALES).
export const OFFERED = ["en", "es", "zh-CN"];

// A translated sentence with nodes in place of its placeholders, in the translation's order.
export function fillNodes(text, nodes) {
  return text
    .split(/(\{\w+\})/)
    .filter(Boolean)
    .map((part) => {
      const key = part.slice(1, -1);
      return part.startsWith("{") && key in nodes ? nodes[key] : part;
    });
}
