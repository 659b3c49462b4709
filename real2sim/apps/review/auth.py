"""The review page's password check, with a limit on failed logins.

After ``max_failures`` wrong passwords for a user name within ``window_s`` seconds, every login of that name (the
right password too) is refused until the window has passed since the last failure, and each wrong answer waits
``delay_s`` before it is given. Gradio's login route does not tell the check who is asking, so the limit counts by
user name (like pam_faillock): guessing is capped at ``max_failures`` per window whatever the number of clients, at
the price of the real user waiting out the window while someone guesses.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections import deque

log = logging.getLogger(__name__)


class LoginLimiter:
    """``check`` is the coroutine Gradio's ``auth=`` calls with ``(username, password)``."""

    def __init__(self, user: str, password: str, max_failures: int = 5, window_s: float = 60.0,
                 delay_s: float = 0.5, clock=time.monotonic):
        if max_failures < 1 or window_s <= 0 or delay_s < 0:
            raise ValueError("LoginLimiter: max_failures >= 1, window_s > 0 and delay_s >= 0")
        self.user, self.password = user, password
        self.max_failures, self.window_s, self.delay_s = max_failures, window_s, delay_s
        self.clock = clock
        self.failures: dict[str, deque] = {}

    def locked(self, username: str) -> bool:
        """Whether ``username`` has used up its failures in the current window."""
        now, seen = self.clock(), self.failures.get(username)
        if seen is None:
            return False
        while seen and now - seen[0] > self.window_s:
            seen.popleft()
        if seen and len(seen) >= self.max_failures and now - seen[-1] <= self.window_s:
            return True
        if not seen:
            self.failures.pop(username, None)
        return False

    async def check(self, username: str, password: str) -> bool:
        if self.locked(username):
            log.warning("review login for '%s' refused: %d failed logins within %g s", username, self.max_failures,
                        self.window_s)
            await asyncio.sleep(self.delay_s)
            return False
        ok = hmac.compare_digest(username.encode(), self.user.encode()) & hmac.compare_digest(
            password.encode(), self.password.encode())
        if ok:
            self.failures.pop(username, None)
            return True
        self.failures.setdefault(username, deque()).append(self.clock())
        if len(self.failures) > 1000:  # names nobody has: keep the table small
            self.failures.pop(next(iter(self.failures)))
        await asyncio.sleep(self.delay_s)
        return False


__all__ = ["LoginLimiter"]
