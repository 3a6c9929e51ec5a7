"""hCaptcha verification for sign-up: fail closed, bounded by a 5 s timeout."""

import json
import logging
import urllib.parse

import errors

TIMEOUT_SECONDS = 5
log = logging.getLogger('frontdesk')


def verify(config, response, remote_ip=None):
    """Raise the 422 "Invalid captcha" unless hCaptcha accepts ``response``.

    Does nothing when HCAPTCHA_SECRET is unset. A verifier that errs, answers
    something other than JSON, or takes longer than 5 s counts as a refusal.
    """
    if not config.hcaptcha_secret:
        return
    if not isinstance(response, str) or not response.strip():
        raise errors.Unprocessable(message='Invalid captcha')
    form = {'secret': config.hcaptcha_secret, 'response': response}
    if remote_ip:
        form['remoteip'] = remote_ip
    # Imported at first use (docs/performance.md, "Worker memory").
    from urllib.request import Request
    from urllib.request import urlopen

    request = Request(
        config.hcaptcha_verify_url,
        data=urllib.parse.urlencode(form).encode('ascii'),
        headers={'Content-Type': 'application/x-www-form-urlencoded'},
        method='POST',
    )
    try:
        with urlopen(request, timeout=TIMEOUT_SECONDS) as answer:
            success = json.loads(answer.read(65536)).get('success') is True
    except Exception as ex:  # noqa: BLE001 - every failure to verify is a refusal
        log.warning('captcha verifier failed: %s', type(ex).__name__)
        success = False
    if not success:
        raise errors.Unprocessable(message='Invalid captcha')
