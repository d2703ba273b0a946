"""JWT bearer auth: short-lived RS256 access tokens plus rotating refresh tokens."""
from datetime import UTC, datetime, timedelta

import jwt
from fastapi import Depends, HTTPException
from fastapi.security import HTTPBearer

from harbor.auth.keys import kms_public_key, kms_sign
from harbor.errors import HarborError

ALGORITHM = "RS256"
ACCESS_TOKEN_TTL = timedelta(minutes=15)
REFRESH_TOKEN_TTL = timedelta(days=14)
bearer = HTTPBearer()


def issue_access_token(subject: str) -> str:
    now = datetime.now(UTC)
    claims = {"sub": subject, "iat": now, "exp": now + ACCESS_TOKEN_TTL}
    return kms_sign(claims, algorithm=ALGORITHM)


def current_subject(creds=Depends(bearer)) -> str:
    try:
        claims = jwt.decode(creds.credentials, kms_public_key(), algorithms=[ALGORITHM])
    except jwt.ExpiredSignatureError:
        raise HTTPException(401, detail=HarborError.TOKEN_EXPIRED.body())
    except jwt.InvalidTokenError:
        raise HTTPException(401, detail=HarborError.INVALID_API_KEY.body())
    return claims["sub"]
