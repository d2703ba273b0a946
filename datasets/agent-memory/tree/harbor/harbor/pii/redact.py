"""Log redaction: mask e-mail addresses, drop phone numbers (GDPR; see docs/gdpr/ropa.md)."""
import logging
import re

EMAIL = re.compile(r"([A-Za-z0-9._%+-])[A-Za-z0-9._%+-]*@([A-Za-z0-9.-]+)")
PHONE = re.compile(r"\+?\d[\d ()-]{7,}\d")


def redact(text: str) -> str:
    text = EMAIL.sub(r"\1***@\2", text)
    return PHONE.sub("[phone removed]", text)


class RedactFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(str(record.msg))
        return True
