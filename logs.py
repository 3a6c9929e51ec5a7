"""One log line format for every process: gunicorn, the app, the mail worker.

``LOG_FORMAT=text`` (default): ``<UTC time> <LEVEL> <logger> <message> key=value...``;
``LOG_FORMAT=json``: one JSON object per line for log shippers. Fields given as
``extra={'fields': {...}}`` (the access lines) become ``key=value`` pairs or JSON keys.
Client-controlled text (a path) goes through ``escape()`` first, so no request can
forge or split a line.
"""

import logging
import re
import sys
import time

import orjson

# C0 and C1 controls, DEL, backslash and space (which separates key=value pairs).
_UNSAFE = re.compile(r'[\x00-\x20\x7f-\x9f\\]')
_NAMED = {'\n': '\\n', '\r': '\\r', '\t': '\\t', '\\': '\\\\'}


def escape(text):
    """``text`` with control characters, backslash and space as escapes."""
    return _UNSAFE.sub(
        lambda match: _NAMED.get(match[0]) or f'\\x{ord(match[0]):02x}', text
    )


def _utc(record):
    return (
        time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(record.created))
        + f'.{int(record.msecs):03d}Z'
    )


class TextFormatter(logging.Formatter):
    def format(self, record):
        line = f'{_utc(record)} {record.levelname} {record.name} {record.getMessage()}'
        fields = getattr(record, 'fields', None)
        if fields:
            line += ''.join(f' {key}={value}' for key, value in fields.items())
        if record.exc_info:
            line += '\n' + self.formatException(record.exc_info)
        return line


class JSONFormatter(logging.Formatter):
    def format(self, record):
        doc = {
            'time': _utc(record),
            'level': record.levelname,
            'logger': record.name,
            'message': record.getMessage(),
        }
        doc.update(getattr(record, 'fields', None) or {})
        if record.exc_info:
            doc['exception'] = self.formatException(record.exc_info)
        return orjson.dumps(doc, default=str).decode()


FORMATTERS = {'text': TextFormatter, 'json': JSONFormatter}


def gunicorn_logconfig(log_format):
    """gunicorn's ``logconfig_dict``: its error log and the root logger in our
    format."""
    handler = {
        'class': 'logging.StreamHandler',
        'formatter': 'frontdesk',
        'stream': 'ext://sys.stderr',
    }
    return {
        'version': 1,
        'disable_existing_loggers': False,
        'formatters': {'frontdesk': {'()': FORMATTERS.get(log_format, TextFormatter)}},
        'handlers': {'console': handler},
        'root': {'level': 'INFO', 'handlers': ['console']},
        'loggers': {
            'gunicorn.error': {
                'level': 'INFO',
                'handlers': ['console'],
                'propagate': False,
            },
            # The app writes the access lines (middleware/access_log.py).
            'gunicorn.access': {'level': 'INFO', 'handlers': [], 'propagate': False},
        },
    }


def configure(log_format='text'):
    """Give the root logger one stderr handler in our format, unless it has handlers
    (under gunicorn, gunicorn_logconfig already did it)."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(FORMATTERS[log_format]())
        root.addHandler(handler)
