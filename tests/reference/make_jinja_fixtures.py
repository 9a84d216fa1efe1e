#!/usr/bin/env python3
"""Reference renderings for the C++ Jinja interpreter (src/tokenizer/jinja/), from Python's jinja2 configured
as transformers' apply_chat_template configures it (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols; `tojson` as json.dumps(ensure_ascii=False); `raise_exception`):

    python3 tests/reference/make_jinja_fixtures.py --out tests/fixtures/tokenizer/jinja_cases.jsonl

Writes a first line {"meta": {"source": "jinja2", "jinja2_version": ...}}, then per case {"template", "context"}
and either {"text"} (what jinja2 renders) or {"error": true} (jinja2 refuses it; the C++ interpreter must refuse
it too). Cases are constructs one at a time: whitespace control, operators, literals, statements, filters,
tests, methods. Needs only jinja2 (3.x). Deterministic.
"""
import argparse
import json

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


DATA = {"d": {"a": 1, "b": [1.5, "é", None]}, "l": [{"a": "q", "n": 2}, {"a": "p"}], "s": "  Hi Thére \n",
        "i": 3, "f": 1.5, "b": False, "n": None, "e": "", "think": "\n<think>r</think>\n\nanswer "}

CASES = [
    # whitespace control
    "a  {{- 'b' -}}  c", "{% if true %}\nyes\n{% endif %}\nz", "line\n    {% if true %}x{% endif %}",
    "line\n    {%+ if true %}x{% endif %}", "  {{ 'v' }}", "a {% if true %}b{% endif %}",
    "{% if true %}\n  {% if true %}\nx\n  {% endif %}\n{% endif %}\n", "a\n{#- c -#}\nb",
    "{%- if true -%}\n\n  x  \n\n{%- endif -%}", "  {# c #}\n  x", "{{ 'a' }}\n  {% if true %}b{% endif %}",
    "{% if true %}  \nx{% endif %}", "x {%- if true %} y{% endif %}", "\t{% for i in [1,2] %}\n\t{{ i }}\n\t{% endfor %}\n",
    "{% raw %}\n{{ x }}{% if %}\n{% endraw %}\nafter", "a\n  {%- raw -%}  x  {%- endraw %}\nb", "  {% raw %}x\n  {% endraw %}\ny",
    # literals and printing
    "{{ 1 }} {{ 2.5 }} {{ 1e3 }} {{ 'a' \"b\" }} {{ true }} {{ none }} {{ False }}", "{{ [\"it's\", 'a\\nb'] }}",
    "{{ d }}", "{{ l }}", "{{ (1, 2) }} {{ (1,) }} {{ () }}", "{{ {'k': [1, (2, 3)]} }}", "{{ 1e16 }} {{ 1e-5 }} {{ 0.1 }}",
    # operators
    "{{ 1 + 2 }} {{ 7 - 10 }} {{ 3 * 4 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }}",
    "{{ 2 ** 10 }} {{ 1 + 0.5 }} {{ 4 / 2 }} {{ -(3) }} {{ 0.1 + 0.2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
    "{{ 'a' + 'b' }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ 1 ~ 'x' ~ none }}", "{{ 1 + 2 * 3 }} {{ 2 * 3 ~ 4 }}",
    "{{ -3|abs }} {{ -(s|length) }} {{ l|length - 1 }}", "{{ 'a' + 1 }}", "{{ 1 / 0 }}", "{{ u + 'x' }}",
    "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ not 0 }} {{ not 1 == 2 }} {{ not u is defined }}",
    "{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] == [1, 2] }} {{ (1, 2) == [1, 2] }} {{ n == none }}",
    "{{ 'b' in 'abc' }} {{ 3 in [1, 2] }} {{ 'a' in d }} {{ 'z' not in 'abc' }} {{ 'x' in u }}",
    "{{ 'y' if 1 else 'n' }}{{ 'y' if 0 else 'n' }}[{{ 'y' if 0 }}]",
    # attributes, indexing, slicing
    "{{ d.a }} {{ d['a'] }} {{ d.b[0] }} {{ d.b[-1] }} [{{ d.nope }}] [{{ d.b[10] }}] {{ l.0.a }}",
    "{{ d.b[1:] }} {{ d.b[::-1] }} {{ d.b[::2] }} {{ d.b[-2:] }} {{ d.b[:-3] }} {{ d.b[5:1:-2] }}",
    "{{ s[1] }}|{{ s[::-1] }}|{{ s[2:6] }}|{{ s|length }}", "{{ u.x }}", "{{ n.x }}|{{ i.x }}",
    # statements
    "{% if i == 1 %}one{% elif i == 3 %}three{% else %}many{% endif %}",
    "{% for x in [10, 20, 30] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
    "{{ loop.revindex }}{{ loop.revindex0 }};{% endfor %}",
    "{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "{% for k in d %}{{ k }}{% endfor %}",
    "{% for x in [] %}x{% else %}empty{% endfor %}", "{% for x in range(6) if x is odd %}{{ x }}{{ loop.length }}{% endfor %}",
    "{% for x in range(5) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in u %}x{% endfor %}ok", "{% for x in 'aé' %}{{ loop.cycle('o', 'e') }}{{ x }}{% endfor %}",
    "{% for (a, b) in [(1, 2), (3, 4)] %}{{ a }}{{ b }}{% endfor %}", "{% for x in range(2, 9, 3) %}{{ x }}{% endfor %}",
    "{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}",
    "{% set ns = namespace(x=1, y='a') %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}{{ ns.y }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}", "{% set block %}x{{ 1 + 1 }}{% endset %}[{{ block }}]",
    "{% if true %}{% set x = 5 %}{% endif %}{{ x }}", "{% set x.y = 1 %}",
    "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} "
    "{{ greet(name='C', punct='.') }}",
    "{% set g = 'global' %}{% macro m() %}{{ g }}{% endmacro %}{{ m() }}",
    "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}",
    "{{ raise_exception('bad role') }}", "{% if x %}", "{{ x", "{% include 'a' %}",
    # filters
    "{{ s|trim }}|{{ s|upper }}|{{ s|lower|trim }}|{{ 'hello wORLD'|title }}|{{ 'hELLO'|capitalize }}",
    "{{ l|length }} {{ l|map(attribute='a')|join(',') }} {{ [3, 1, 2]|sort }} {{ [1, 2, 1]|unique|list }} "
    "{{ [1, 2]|reverse|list }} {{ [1, 2]|first }}{{ [1, 2]|last }} {{ 'abc'|reverse }}",
    "{{ l|selectattr('n', 'defined')|map(attribute='a')|join }} {{ l|rejectattr('n')|map(attribute='a')|list }} "
    "{{ l|selectattr('a', 'equalto', 'p')|list|length }}",
    "{{ [0, 1, 2]|select|list }} {{ [1, 2, 3, 4]|select('even')|list }} {{ [1, 2, 3]|reject('odd')|list }}",
    "{{ u|default('d') }} {{ e|default('d') }} {{ e|default('d', true) }} {{ 'x'|d('d') }} {{ n|default('d') }}",
    "{{ 'a-b-c'|replace('-', '+') }} {{ 'a-b-c'|replace('-', '+', 1) }} {{ '42'|int + 1 }} {{ 'x'|int }} "
    "{{ 3|string ~ 'x' }} {{ 'ab'|list }} {{ 2.7|int }}",
    "{{ d|items|list }} {{ l|sort(attribute='a')|map(attribute='a')|join }} {{ d|dictsort }}",
    "{{ ['a', 'B', 'c']|map('upper')|join }} {{ [1, 2, 3]|sum }} {{ [3, 1]|min }}{{ [3, 1]|max }} {{ ['b', 'A']|sort }}",
    "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'x'|safe }}|{{ 'x y  z'|wordcount }}",
    "{{ d|tojson }}", "{{ l|tojson(indent=2) }}", "{{ d|tojson(indent=0) }}", "{{ d|tojson(separators=(',', ':')) }}",
    "{{ 'x\\u0001\"'|tojson }} {{ 3|tojson }} {{ 1.0|tojson }} {{ n|tojson }} {{ [true, 1e20]|tojson }}",
    "{{ 3.0|round }} {{ 2.567|round(2) }} {{ -3|abs }} {{ '1.5'|float }} {{ 2.5|round(0, 'floor') }}",
    "{{ x|frobnicate }}", "{% if false %}{{ x|frobnicate }}{% endif %}",
    # tests
    "{{ s is defined }}{{ u is defined }}{{ u is undefined }}{{ n is none }}{{ s is not none }}",
    "{{ s is string }}{{ d is mapping }}{{ l is mapping }}{{ l is iterable }}{{ s is sequence }}{{ u is iterable }}",
    "{{ i is number }}{{ f is number }}{{ s is number }}{{ i is integer }}{{ f is float }}{{ b is number }}",
    "{{ b is false }}{{ b is true }}{{ 0 is false }}{{ i is odd }}{{ i is even }}{{ i is divisibleby 3 }}",
    "{{ b is sameas false }}{{ 0 is sameas false }}{{ n is sameas none }}{{ s is equalto 'x' }}{{ i is eq(3) }}",
    "{{ i is gt 2 }}{{ i is lt 2 }}{{ i is ge 3 }}{{ i is le 2 }}{{ 'a' is in 'cat' }}{{ 'AB' is upper }}{{ 'ab' is lower }}",
    "{{ d is boolean }}{{ b is boolean }}{{ raise_exception is callable }}", "{{ x is frobnicated }}",
    # methods
    "[{{ think.strip() }}][{{ think.lstrip('\\n') }}][{{ think.rstrip() }}]",
    "{{ think.split('</think>')[-1].lstrip('\\n') }}|{{ think.split('</think>')[0].split('<think>')[-1] }}",
    "{{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ ' a b  c '.split(none, 1) }} {{ 'abc'.startswith('ab') }}"
    "{{ 'abc'.endswith(('x', 'c')) }}",
    "{{ 'aXa'.replace('a', 'b') }} {{ 'Ab'.upper() }}{{ 'Ab'.lower() }} {{ 'it\\'s a dog-day'.title() }} {{ 'aB'.capitalize() }}",
    "{{ d.keys()|list }} {{ d.values()|list }} {{ d.get('a') }} {{ d.get('z', 'none') }} {{ d.get('z') }}",
    "{{ '-'.join(['a', 'b']) }} {{ 'xx'.strip('x') }}|{{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} "
    "{{ 'hello'.count('l') }} {{ '12'.isdigit() }}",
    "{{ 'éÀ ñ Straße ΑΒγ мир Łódź'.upper() }}|{{ 'ÉÀ Ñ ΑΒΓ МИР ŁÓDŹ'.lower() }}|{{ 'élan vital'|title }}|"
    "{{ 'émile'|capitalize }}",
    "{{ 'x'.frob() }}", "{{ l.append(1) }}",
    # globals
    "{{ range(3)|list }} {{ range(1, 3)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b='x') }}",
    "{% set ns = namespace(d) %}{{ ns.a }}",
    # dicts keyed by other hashable values (Seed-OSS keys one by integers), and tojson's sort_keys
    "{% set g = {0: 'a', 512: 'b', 16384: 'c'} %}{{ g[512] }} {{ g }} {{ g|dictsort }} {{ 512 in g }} {{ '0' in g }} "
    "{{ g.get(0) }} {{ g|tojson }} {% for k, v in g|dictsort(reverse=true) %}{{ k }}{{ v }}{% endfor %}",
    "{{ {1: 'a', 1.0: 'b', true: 'c'} }} {{ {(1, 2): 'x'}[(1, 2)] }} {{ {none: 1, 2.5: 2, false: 3}|tojson }}",
    "{{ {[1]: 2} }}", "{{ {(1, 2): 1}|tojson }}", "{{ d[[1]] }}", "{% set g = {2: 'x', 'a': 'y'} %}{{ g['a'] }}{{ g[2] }}",
    "{{ {'b': 1, 'a': {'d': 1, 'c': 2}}|tojson(sort_keys=true) }} {{ {10: 'x', 2: 'y'}|tojson(sort_keys=true) }}",
    "{{ d|tojson(indent=2, sort_keys=true) }}", "{{ {2: 'x', 'a': 'y'}|tojson(sort_keys=true) }}",
    "{{ {'b': 1, 'a': 2}|dictsort }} {{ {3: 1, 1: 2}|items|list }} {{ {3: 1, 1: 2}.keys()|list }}",
    # printf-style formatting: str % args
    "{{ '%s and %s' % ('a', 1) }}|{{ '%d items' % 3 }}|{{ '%5.2f|%-6s|%06.1f|%+d|% d' % (3.14159, 'ab', -2.5, 4, 5) }}",
    "{{ '%(name)s is %(age)d, %(name)r' % {'name': 'A', 'age': 30} }}",
    "{{ '%x %X %o %#x %#o %e %E %g %G %c %c %r %%' % (255, 255, 8, 255, 8, 12345.678, 0.00012, 0.0001, 1e20, 65, 'é',"
    " 'it') }}",
    "{{ '%s' % [1, 2] }}|{{ '%s' % {'a': 1} }}|{{ 'abc' % {} }}|{{ 'abc' % [] }}|{{ '%s' % ((1, 2),) }}",
    "{{ '%s %s' % ('a',) }}", "{{ '%s' % ('a', 'b') }}", "{{ '%d' % 'x' }}", "{{ '%q' % 1 }}", "{{ 'abc' % 5 }}",
    "{{ '%x' % 1.5 }}", "{{ '%(a)s' % ('x',) }}", "{{ '%(b)s' % {'a': 1} }}", "{{ '%c' % 'ab' }}", "{{ 'a%' % () }}",
    "{{ '%.2s|%5s|%-5s|%5.1s|' % ('héllo', 'é', 'é', 'éa') }}", "{{ '%*d|%-*d|%.*f|%*s' % (5, 42, 4, 7, 2, 3.14159, -4, 'x') }}",
    "{{ '%d %i %u' % (3.9, -2.5, 7) }} {{ '%.3d|%5.3d|%-8.3x|%08.3f|%-+5d|' % (7, -7, 255, -3.14159, 3) }}",
    "{{ '%s' % none }}|{{ '%r' % none }}|{{ '%s' % true }}|{{ '%d' % true }}|{{ '%a' % 'é€😀' }}|{{ '%s' % u }}|",
    "{{ '%.1f %.0f %.0f %.2e %g %g %#g %G' % (0.05, 0.5, 1.5, 0.0, 1e-5, 123456789.0, 1.0, 1e-10) }}",
    "{{ '%s' % 12345678901234567890 }} {{ '%d' % 12345678901234567890 }} {{ '%5s|%-5d|%05d' % ('ab', -3, -3) }}",
    "{{ 'tools: %s' % (d.b | tojson) }} {{ '%s=%s' % (i, f) }} {{ '%ld %hd %Lf' % (1, 2, 0.5) }}",
    # {% filter %} blocks
    "{% filter upper %}hello {{ s|trim }}{% endfilter %}|{% filter replace('a', 'o')|upper %}banana{% endfilter %}",
    "[{% filter trim %}  x {{ i }}  {% endfilter %}] {% filter indent(2) %}a\nb{% endfilter %}",
    "{% filter frob %}x{% endfilter %}", "{% filter upper %}x", "{% filter tojson %}{{ i }}\n{% endfilter %}",
    # {% call %} blocks, caller(), varargs and kwargs
    "{% macro box(t) %}[{{ t }}:{{ caller() }}]{% endmacro %}{% call box('T') %}body {{ i }}{% endcall %}",
    "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }};{% endfor %}{% endmacro %}"
    "{% call(item, sep='-') each([1, 2]) %}<{{ item }}{{ sep }}>{% endcall %}",
    "{% set y = 'Y' %}{% macro twice() %}{{ caller() }}{{ caller() }}{% endmacro %}{% call twice() %}{{ y }}{% endcall %}",
    "{% call nothing() %}x{% endcall %}", "{% macro plain() %}p{% endmacro %}{% call plain() %}x{% endcall %}",
    "{% macro m() %}{{ caller is defined }}{% endmacro %}{{ m() }}",
    "{% macro v(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, 2, 3, k='x') }}|{{ v() }}",
    "{% macro p(a) %}{{ a }}{% endmacro %}{{ p(1, 2) }}", "{% macro p(a) %}{{ a }}{% endmacro %}{{ p(b=1) }}",
    "{% macro outer() %}<{{ caller() }}>{% endmacro %}{% macro inner() %}{% call outer() %}{{ caller() }}!{% endcall %}"
    "{% endmacro %}{% call inner() %}deep{% endcall %}",
    # recursive loops
    "{% set tree = [{'n': 'a', 'c': [{'n': 'b', 'c': [{'n': 'c'}]}, {'n': 'e'}]}, {'n': 'd'}] %}"
    "{% for x in tree recursive %}{{ x.n }}{{ loop.depth }}{{ loop.depth0 }}{{ loop.index }}"
    "{% if x.c %}({{ loop(x.c) }}){% endif %}{% if not loop.last %},{% endif %}{% endfor %}",
    "{% for x in [3, 0, 2] if x recursive %}{{ x }}{% if x > 1 %}[{{ loop(range(x - 1)) }}]{% endif %}{% endfor %}",
    "{% for x in [1] %}{{ loop.depth }}{{ loop.depth0 }}{{ loop([2]) }}{% endfor %}",
    "{% for x in [1, 2] recursive %}{% set z = x %}{{ z }}{% endfor %}{{ z }}",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    with open(args.out, "w", encoding="utf-8") as out:
        out.write(json.dumps({"meta": {"source": "jinja2", "jinja2_version": jinja2.__version__}}) + "\n")
        for template in CASES:
            row = {"template": template, "context": DATA}
            try:
                row["text"] = env.from_string(template).render(**DATA)
            except Exception:  # noqa: BLE001 - any refusal is what the case records
                row["error"] = True
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
