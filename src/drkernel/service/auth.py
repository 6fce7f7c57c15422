"""Optional bearer-token auth for the API."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request, status


def bearer_guard(token: str | None):
    """A FastAPI dependency that rejects requests without ``Authorization: Bearer <token>``
    (a no-op when ``token`` is None)."""

    async def guard(request: Request) -> None:
        if token is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), token.encode()):
            raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing or wrong bearer token",
                                headers={"WWW-Authenticate": "Bearer"})

    return guard
