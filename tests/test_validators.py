"""validators.inline_refs: the compiled schemas validate exactly as the files do."""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import jsonschema
import pytest
import referencing

import validators

SCHEMAS = validators.load_schemas()
REGISTRY = referencing.Registry().with_resources(
    (f'{stem}.json', referencing.Resource.from_contents(schema))
    for stem, schema in validators.with_server_checks(SCHEMAS).items()
)
COMPILED = validators.load_validators()


def _property_names(node, found):
    if isinstance(node, dict):
        found.update(node.get('properties', {}))
        for value in node.values():
            _property_names(value, found)
    elif isinstance(node, list):
        for value in node:
            _property_names(value, found)
    return found


# Keys the schemas know, so that generated bodies reach their rules and references.
KEYS = sorted(_property_names(SCHEMAS, set()))
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(['', ' ', 'a@b.co', 'Europe/Paris', 'x' * 300, 'é' * 40])
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=4
        )
    ),
    max_leaves=12,
)


def _errors_with_refs(stem, doc):
    """The validator before inlining: the file's $refs looked up as it runs."""
    validator = validators._Validator(
        REGISTRY.contents(f'{stem}.json'),
        registry=REGISTRY,
        format_checker=validators._FORMATS,
    )
    found = {}
    for error in validator.iter_errors(doc):
        attribute, text = validators._message(error)
        found.setdefault(attribute, text)
    return list(found.items())


@settings(max_examples=300, deadline=None)
@given(stem=st.sampled_from(sorted(SCHEMAS)), doc=DOCUMENTS)
def test_inlined_schemas_report_what_the_files_do(stem, doc):
    assert COMPILED[stem].errors(doc) == _errors_with_refs(stem, doc)


@pytest.mark.parametrize('stem', sorted(SCHEMAS))
def test_each_schema_reaches_its_properties_with_the_same_messages(stem):
    """Every property of every schema, given a value of each kind, inside the objects
    that hold it: the messages agree with the referencing validator's."""
    names = sorted(_property_names(SCHEMAS[stem], set()))
    for value in (None, True, 7, 1.5, '', ' ', 'x' * 300, [], {}, 'a@b.co'):
        doc = {name: value for name in names}
        doc.update({name: dict(doc) for name in names if name in ('profile', 'user')})
        assert COMPILED[stem].errors(doc) == _errors_with_refs(stem, doc)


def test_a_reference_beside_other_keywords_keeps_both():
    compiled = COMPILED['account_update']._validator.schema
    inlined = compiled['properties']['support_email']['anyOf'][0]
    assert '$ref' not in inlined and 'allOf' in inlined
    assert {'type', 'maxLength'} <= inlined.keys()


def test_no_reference_is_left_in_a_compiled_schema():
    def refs(node):
        if isinstance(node, dict):
            return ('$ref' in node) + sum(refs(value) for value in node.values())
        if isinstance(node, list):
            return sum(refs(value) for value in node)
        return 0

    assert sum(refs(v._validator.schema) for v in COMPILED.values()) == 0


@pytest.mark.parametrize('stem', sorted(SCHEMAS))
def test_each_schema_is_a_valid_2020_12_schema(stem):
    validators._Validator.check_schema(SCHEMAS[stem])


def test_a_broken_schema_is_named():
    with pytest.raises(jsonschema.exceptions.SchemaError, match="'strin'"):
        validators._Validator.check_schema({'type': 'strin'})


def test_a_reference_cycle_stops_the_boot():
    registry = referencing.Registry().with_resources(
        [
            (
                'loop.json',
                referencing.Resource.from_contents(
                    {
                        '$schema': 'https://json-schema.org/draft/2020-12/schema',
                        'properties': {'a': {'$ref': '#/$defs/node'}},
                        '$defs': {
                            'node': {'properties': {'next': {'$ref': '#/$defs/node'}}}
                        },
                    }
                ),
            )
        ]
    )
    with pytest.raises(RuntimeError, match='is a cycle'):
        validators.inline_refs(registry, 'loop.json')


def test_null_values_in_a_schema_stay_null():
    """A JSON null in a schema (an enum member, a const) is kept as it is, not taken for
    the start of a new walk."""
    schema = {
        '$schema': 'https://json-schema.org/draft/2020-12/schema',
        'properties': {
            'a': {'enum': ['x', None]},
            'b': {'const': None},
            'c': {'$ref': '#/$defs/maybe'},
        },
        '$defs': {'maybe': {'enum': [None, 1]}},
    }
    registry = referencing.Registry().with_resources(
        [('nulls.json', referencing.Resource.from_contents(schema))]
    )
    inlined = validators.inline_refs(registry, 'nulls.json')
    assert inlined['properties'] == {
        'a': {'enum': ['x', None]},
        'b': {'const': None},
        'c': {'enum': [None, 1]},
    }


def test_a_property_named_ref_and_data_that_looks_like_one_are_not_references():
    """Only a ``$ref`` in a schema's own keywords is a reference: one that names a
    property, or sits in a const, an enum or an example, stays as it is."""
    schema = {
        '$schema': 'https://json-schema.org/draft/2020-12/schema',
        'type': 'object',
        'properties': {
            '$ref': {'type': 'string'},
            'link': {'const': {'$ref': '#/$defs/text'}},
            'text': {'$ref': '#/$defs/text'},
        },
        'examples': [{'$ref': 'x', 'link': {'$ref': '#/$defs/text'}}],
        '$defs': {'text': {'type': 'string', 'maxLength': 3}},
    }
    registry = referencing.Registry().with_resources(
        [('refs.json', referencing.Resource.from_contents(schema))]
    )
    inlined = validators.inline_refs(registry, 'refs.json')
    assert inlined['properties'] == {
        '$ref': {'type': 'string'},
        'link': {'const': {'$ref': '#/$defs/text'}},
        'text': {'type': 'string', 'maxLength': 3},
    }
    assert inlined['examples'] == schema['examples']
    check = validators._Validator(inlined, registry=registry)
    assert not list(check.iter_errors({'$ref': 'x', 'link': {'$ref': '#/$defs/text'}}))
    assert [e.validator for e in check.iter_errors({'$ref': 1})] == ['type']
    assert [e.validator for e in check.iter_errors({'text': 'long'})] == ['maxLength']
