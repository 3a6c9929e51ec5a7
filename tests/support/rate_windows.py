"""Rate-limit windows are fixed and start on multiples of their period (sql/queries/
rate_limits.sql), and every period the service declares is a multiple of a minute. A
test that counts requests up to a 429 must make them all in one window: one that
straddled a boundary saw its sixth sign-in answered 200."""

import time

MINUTE = 60


def start_clear_of_a_window_boundary(period=MINUTE, margin=8):
    """Wait out a boundary of windows of ``period`` seconds (those of the rate limits
    by default, or TOTP steps) less than ``margin`` seconds away."""
    to_boundary = period - time.time() % period
    if to_boundary < margin:
        time.sleep(to_boundary + 0.1)
