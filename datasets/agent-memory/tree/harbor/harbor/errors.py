"""Stable user-facing error codes. A code is never reused, even after its error is removed."""
from enum import Enum


class HarborError(Enum):
    INVALID_API_KEY = ("HBR-1001", 401)
    TOKEN_EXPIRED = ("HBR-1002", 401)
    EXPORT_NOT_FOUND = ("HBR-2001", 404)
    UPSTREAM_S3_TIMEOUT = ("HBR-3001", 504)
    # HBR-3002 retired 2025-11 (billing sync removed); do not reuse
    EXPORT_QUOTA_EXCEEDED = ("HBR-4031", 403)

    def body(self) -> dict:
        code, _status = self.value
        return {"code": code}
