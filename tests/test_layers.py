"""The code keeps to architecture.py, and docs/architecture.md shows it; every named
query the code asks for exists.

A module imports modules of its own layer or of the layers below it, minus SIDEWAYS
(services never import middleware...); the parts of services/ keep to
SERVICE_IMPORTS_REFUSED. Imports are read from the source (db.source_files: not
tests/, bench/ or scripts/), those inside functions included. What middleware and
apidoc read off a resource is a RESOURCE_DECLARATIONS name, so a callback from
middleware into resources, which no import shows, is declared too. Query names are read
the same way (db.query_lookups); this module is their only check (the app does not
check them at boot).
"""

import ast

import falcon

import app as app_module
import architecture
import db
from validators import load_validators

RANK = {
    name: len(architecture.LAYERS) - index
    for index, (_, names, _) in enumerate(architecture.LAYERS)
    for name in names
}
LAYER_NAME = {name: layer for layer, names, _ in architecture.LAYERS for name in names}
PART = {
    f'services.{module}': part
    for part, (modules, _) in architecture.SERVICE_PARTS.items()
    for module in modules
}
SIDEWAYS = {module: never for module, (never, _) in architecture.SIDEWAYS.items()}
REFUSED_PARTS = {
    part: never for part, (never, _) in architecture.SERVICE_IMPORTS_REFUSED.items()
}
# The responders falcon calls are its own protocol, not a declaration.
RESPONDERS = {f'on_{method.lower()}' for method in falcon.COMBINED_METHODS}


def module_name(path, root):
    """``services/audit.py`` -> ``services.audit``; ``gunicorn.conf.py`` ->
    ``gunicorn.conf``."""
    parts = path.relative_to(root).parts
    if len(parts) == 1:
        return path.stem
    return '.'.join([*parts[:-1], *([] if path.name == '__init__.py' else [path.stem])])


def top(module):
    """The LAYERS name of a module: a top-level file's own name, else its package's."""
    return module if module in RANK and '.' in module else module.split('.')[0]


def imported_modules(path, module, project):
    """``(line, module)`` of every project module ``path`` imports (``from m import
    name``: m)."""
    package = (
        module.split('.') if path.name == '__init__.py' else module.split('.')[:-1]
    )
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                base = '.'.join(
                    [
                        *package[: len(package) - node.level + 1],
                        *([base] if base else []),
                    ]
                )
            names = [f'{base}.{alias.name}' for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split('.')
            # The longest prefix that is a project module: a module, or the package it
            # is in.
            found = next(
                (
                    '.'.join(parts[:end])
                    for end in range(len(parts), 0, -1)
                    if '.'.join(parts[:end]) in project
                ),
                None,
            )
            if found is not None:
                yield node.lineno, found


def violations(root=db.ROOT):
    files = {module_name(path, root): path for path in db.source_files(root)}
    found = []
    for module, path in files.items():
        where = str(path.relative_to(root))
        if top(module) not in RANK:
            found.append(
                f'{where}: in no layer (add {top(module)!r} to LAYERS in '
                'architecture.py)'
            )
            continue
        if module.startswith('services.') and module not in PART:
            found.append(f'{where}: in no part of SERVICE_PARTS')
        for line, target in imported_modules(path, module, files):
            if top(target) not in RANK or target == module:
                continue
            what = f'{where}:{line} imports {target}'
            if RANK[top(target)] > RANK[top(module)]:
                found.append(f'{what}, of a higher layer ({LAYER_NAME[top(target)]})')
            elif top(target) in SIDEWAYS.get(top(module), ()):
                found.append(f'{what}: {top(module)} never imports {top(target)}')
            elif PART.get(target) in REFUSED_PARTS.get(PART.get(module), ()):
                found.append(f'{what}: {PART[module]} never imports {PART[target]}')
    return found


def resource_reads(root=db.ROOT):
    """{name: [where]}: what the code reads off a resource, as ``resource.name``,
    ``getattr(resource, 'name', ...)`` or ``hasattr`` (falcon's process_resource, apidoc
    and app.py all call it ``resource``)."""
    found = {}
    for path in db.source_files(root):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            name = None
            if isinstance(node, ast.Attribute) and _is_resource(node.value):
                name = node.attr
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ('getattr', 'hasattr')
                and len(node.args) > 1
                and _is_resource(node.args[0])
                and isinstance(node.args[1], ast.Constant)
            ):
                name = node.args[1].value
            if name is not None and name not in RESPONDERS:
                where = f'{path.relative_to(root)}:{node.lineno}'
                found.setdefault(name, []).append(where)
    return found


def _is_resource(node):
    return isinstance(node, ast.Name) and node.id == 'resource'


def test_imports_point_down():
    assert violations() == []


def test_every_service_module_is_in_one_part():
    modules = [
        module
        for modules, _ in architecture.SERVICE_PARTS.values()
        for module in modules
    ]
    assert len(modules) == len(set(modules))
    assert {f'services.{module}' for module in modules} == {
        module_name(path, db.ROOT)
        for path in (db.ROOT / 'services').glob('*.py')
        if path.name != '__init__.py'
    }


def test_a_wrong_way_import_is_named(tmp_path):
    files = {
        'app.py': '',
        'db.py': 'import app\n',
        'middleware/__init__.py': '',
        'middleware/validation.py': 'import errors\n',
        'errors.py': '',
        'services/__init__.py': '',
        'services/addresses.py': 'from middleware.validation import SCHEMAS_DIR\n',
        'services/sessions.py': 'def later():\n    from services import profiles\n',
        'services/profiles.py': 'from . import sessions\nimport falcon\n',
        'services/stray.py': '',
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    assert violations(tmp_path) == [
        'db.py:1 imports app, of a higher layer (the face)',
        'services/addresses.py:1 imports middleware.validation: '
        'services never imports middleware',
        'services/sessions.py:2 imports services.profiles: '
        'credentials never imports accounts',
        'services/stray.py: in no part of SERVICE_PARTS',
    ]


def test_what_middleware_reads_off_a_resource_is_declared():
    reads = resource_reads()
    assert [
        f'{where[0]}: {name} is in no RESOURCE_DECLARATIONS of architecture.py'
        for name, where in sorted(reads.items())
        if name not in architecture.RESOURCE_DECLARATIONS
    ] == []
    assert sorted(set(architecture.RESOURCE_DECLARATIONS) - set(reads)) == []


def test_a_callback_into_a_resource_is_seen(tmp_path):
    (tmp_path / 'middleware').mkdir()
    (tmp_path / 'middleware' / 'limits.py').write_text(
        'def process_resource(req, resp, resource, params):\n'
        "    if hasattr(resource, 'on_refused'):\n"
        '        resource.on_refused(req)\n'
        "    return getattr(resource, 'access', {}), resource.on_get\n"
    )
    assert resource_reads(tmp_path) == {
        'on_refused': ['middleware/limits.py:2', 'middleware/limits.py:3'],
        'access': ['middleware/limits.py:4'],
    }


def test_a_hook_is_a_function_per_method_the_resource_serves(config, queries):
    hooks = [
        name
        for name, (kind, _) in architecture.RESOURCE_DECLARATIONS.items()
        if kind == 'hook'
    ]
    declared = [
        (resource, name, method, hook)
        for _, resource in app_module.routes(None, queries, config, load_validators())
        for name in hooks
        for method, hook in getattr(resource, name, {}).items()
    ]
    assert {name for _, name, _, _ in declared} == set(hooks)
    for resource, name, method, hook in declared:
        assert callable(hook) and method in resource.access, (resource, name, method)


def test_docs_architecture_shows_the_declaration():
    """Its tables are architecture.render()'s: after a change to architecture.py,
    ``.venv/bin/python architecture.py`` rewrites them."""
    text = architecture.DOC.read_text()
    assert architecture.generated(text) == architecture.render()


def test_every_named_query_the_code_asks_for_exists(queries):
    lookups = db.query_lookups()
    assert len(lookups) > 50  # the scan sees the code's lookups at all
    assert [f'{where}: {key}' for key, where in lookups if key not in queries] == []


def test_every_named_query_is_asked_for(queries):
    """Nothing is unused today, so a query nobody runs is a failure too (delete it)."""
    assert sorted(set(queries) - {key for key, _ in db.query_lookups()}) == []


def test_a_query_name_built_at_run_time_is_seen_as_no_name(tmp_path):
    """A name built at run time cannot be checked: the scan reports it without a key,
    so test_every_named_query_the_code_asks_for_exists fails on it."""
    (tmp_path / 'x.py').write_text(
        'def f(self, queries, name):\n'
        "    return self._queries['a.known'], queries[f'a.{name}']\n"
    )
    assert db.query_lookups(tmp_path) == (('a.known', 'x.py:2'), (None, 'x.py:2'))
