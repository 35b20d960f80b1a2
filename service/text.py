"""Words for people, marked for the gettext catalogs (service/i18n_catalogs.py) where they are
written, and translated where they are shown (service/i18n.py): the computation never reads them."""


def N_(message: str) -> str:  # noqa: N802 (gettext's name: "extract this, translate it later")
    return message
