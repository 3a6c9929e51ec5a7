"""Which browser, platform and device a request comes from, read from its User-Agent."""

import functools

from services import audit

FIELDS = ('browser_name', 'browser_version', 'platform_name', 'device_name')


@functools.lru_cache(maxsize=512)
def device(user_agent):
    """What the User-Agent says: client, browser and platform names and versions,
    device.

    uap-core's rules (ua-parser) read the string; 'Other' is its word for "unknown",
    given here as None. client_name is what a person would call it ("Firefox on Linux").
    """
    # Imported at a worker's first User-Agent to read (a sign-in, a session list): the
    # rules and their YAML loader are about 1.5 MB a worker that only serves the hot
    # paths does not carry (against the house rule of imports at the top, for that
    # reason; docs/performance.md, "Worker memory"). Python caches the module.
    import ua_parser

    result = ua_parser.parse(user_agent or '')
    browser = _known(result.user_agent and result.user_agent.family)
    version = _version(result.user_agent)
    platform = _known(result.os and result.os.family)
    device_name = _known(result.device and result.device.family)
    if device_name in ('Spider', 'Generic Smartphone', 'Generic Feature Phone'):
        device_name = None
    client_name = (
        f'{browser} on {platform}' if browser and platform else browser or platform
    )
    return {
        'client_name': client_name[:255] if client_name else None,
        'browser_name': browser,
        'browser_version': version,
        'platform_name': platform,
        'platform_version': _version(result.os),
        'device_name': device_name,
    }


def _version(part):
    """'17.4' of a parsed browser or operating system; None when it has none."""
    version = part and '.'.join(filter(None, (part.major, part.minor)))
    return (version or None) and version[:100]


def _known(name):
    return name[:100] if name and name != 'Other' else None


def request_device(facts):
    """device() of a request's RequestFacts (or None), plus its address and
    User-Agent."""
    facts = facts or audit.NO_REQUEST
    return {
        **device(facts.user_agent),
        'ip_address': facts.ip_address,
        'user_agent': facts.user_agent,
    }


def describe(facts):
    """ "Firefox 120.0 on Linux" for an e-mail; "an unknown device" when nothing is
    known."""
    browser = ' '.join(
        filter(None, (facts.get('browser_name'), facts.get('browser_version')))
    )
    parts = [
        browser or None,
        facts.get('platform_name') and f'on {facts["platform_name"]}',
        facts.get('device_name') and f'({facts["device_name"]})',
    ]
    return ' '.join(filter(None, parts)) or 'an unknown device'
