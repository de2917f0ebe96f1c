"""The tile IR: text round trip, parse errors, the verifier and the content hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiledsl.errors import IRError
from tiledsl.ir.parser import parse_ir
from tiledsl.ir.printer import canonical, ir_hash, print_ir
from tiledsl.ir.verify import verify

GOLDEN = Path(__file__).parents[1] / "golden"
ALL_IR = sorted(GOLDEN.rglob("*.ir"))

GOOD = """
kernel @k(%x: tensor<10xf32>) file "k.py" symbols [B0 = 10 loc(3)] {
  %out = tensor.empty : tensor<10xf32> loc(2)
  grid (%t: range<10xB0>) {
    %v = load %x, %t : tile<B0xf32> loc(4)
    %c = const {value = -inf} : f32
    %b = broadcast %c : tile<B0xf32>
    %m = maximum %v, %b : tile<B0xf32> loc("other.py":9)
    store %out, %t, %m loc(5)
  } loc(3)
  return %out
}
"""


@pytest.mark.parametrize("path", ALL_IR, ids=lambda p: p.name)
def test_round_trip(path: Path) -> None:
    fn = parse_ir(path.read_text())
    verify(fn)
    again = parse_ir(print_ir(fn))
    assert canonical(again) == canonical(fn)
    assert print_ir(again) == print_ir(fn)


def test_round_trip_keeps_locations_and_names() -> None:
    fn = parse_ir(GOOD)
    text = print_ir(fn)
    assert 'loc("other.py":9)' in text and "loc(4)" in text and "%m = maximum" in text
    assert print_ir(parse_ir(text)) == text
    ops = list(fn.walk())
    assert ops[2].loc is not None and (ops[2].loc.file, ops[2].loc.line) == ("k.py", 4)


def test_hash_ignores_names_and_locations() -> None:
    a = parse_ir(GOOD)
    renamed = GOOD.replace("%v", "%value").replace("loc(4)", "loc(40)").replace('"k.py"', '"z.py"')
    b = parse_ir(renamed)
    assert canonical(a) != canonical(b)
    assert ir_hash(a) == ir_hash(b)
    changed = parse_ir(GOOD.replace("maximum", "minimum"))
    assert ir_hash(changed) != ir_hash(a)
    wider = parse_ir(GOOD.replace("10", "11"))
    assert ir_hash(wider) != ir_hash(a)


def test_clone_is_equal_and_independent() -> None:
    fn = parse_ir(GOOD)
    copy = fn.clone()
    assert canonical(copy) == canonical(fn)
    copy.body.ops.pop(0)
    assert canonical(copy) != canonical(fn)


@pytest.mark.parametrize("text, message", [
    (GOOD.replace("maximum %v, %b", "maximum %v, %nope"), "used before it is defined"),
    (GOOD.replace("maximum", "maxi"), "unknown op 'maxi'"),
    (GOOD.replace(": tile<B0xf32> loc(4)", ": tile<B0xf16> loc(4)"), "do not match"),
    (GOOD.replace("f32>) file", "f99>) file"), "unknown dtype"),
    (GOOD.replace("{value = -inf}", "{value = @}"), "cannot read"),
])
def test_parse_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(IRError, match=message) as info:
        parse_ir(text)
    assert "line " in str(info.value)


def _verify_fails(text: str, message: str) -> None:
    fn = parse_ir(text)
    with pytest.raises(IRError, match=message):
        verify(fn)


def test_verifier_rejects_device_ops_on_the_host() -> None:
    text = GOOD.replace("  %out = tensor.empty : tensor<10xf32> loc(2)\n",
                        "  %out = tensor.empty : tensor<10xf32> loc(2)\n"
                        "  %r = tile.index %x : tile<B0xi32>\n")
    with pytest.raises(IRError):
        parse_ir(text)  # a tensor is not a range: the op rule already refuses it


def test_verifier_rejects_a_symbol_cutting_two_nested_ranges() -> None:
    text = GOOD.replace("grid (%t: range<10xB0>) {", "grid (%t: range<10xB0>, %u: range<10xB0>) {")
    _verify_fails(text, "cuts two nested ranges")


def test_verifier_rejects_undeclared_symbols() -> None:
    _verify_fails(GOOD.replace("symbols [B0 = 10 loc(3)]", "symbols [B1 = 10]"), "B0")


def test_verifier_rejects_a_missing_return() -> None:
    _verify_fails(GOOD.replace("  return %out\n", ""), "return")


def test_verifier_checks_loop_yields() -> None:
    text = """
kernel @k(%x: tensor<10xf32>) symbols [B0 = 10, B1 = 10] {
  %out = tensor.empty : tensor<10xf32>
  grid (%t: range<10xB0>) {
    %z = const {value = 0.0} : f32
    %acc = for %z : f32 (%k: range<10xB1>, %a: f32) {
      %i = const {value = 1} : i32
      yield %i
    }
  }
  return %out
}
"""
    _verify_fails(text, "yielded values")


def test_verifier_checks_store_types() -> None:
    text = GOOD.replace("store %out, %t, %m loc(5)", "store %out, %t, %c loc(5)")
    with pytest.raises(IRError, match="store of f32"):
        parse_ir(text)
