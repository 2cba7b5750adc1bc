import * as fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { pythonJsonDumps } from './python-json.ts';

// Every expected string below is what CPython 3's `json.dumps(value)` prints for the Python value in the comment.
describe('pythonJsonDumps writes what Python’s json.dumps writes', () => {
  it('uses ", " and ": " and escapes non-ASCII as \\uXXXX, an astral character as its surrogate pair', () => {
    // json.dumps({"a": [1, "é", "😀"], "b": None, "c": True})
    expect(pythonJsonDumps({ a: [1, 'é', '😀'], b: null, c: true })).toBe(String.raw`{"a": [1, "\u00e9", "\ud83d\ude00"], "b": null, "c": true}`);
    // json.dumps({"x": {"y": [1, 2, {"z": False}]}, "e": [], "o": {}})
    expect(pythonJsonDumps({ x: { y: [1, 2, { z: false }] }, e: [], o: {} })).toBe('{"x": {"y": [1, 2, {"z": false}]}, "e": [], "o": {}}');
  });

  it('escapes with lowercase hex, in keys as in values: Cyrillic, CJK, U+2028, DEL, lone surrogates', () => {
    // json.dumps({"ключ": "Дмитро", "city": "東京"})
    expect(pythonJsonDumps({ ключ: 'Дмитро', city: '東京' })).toBe(
      String.raw`{"\u043a\u043b\u044e\u0447": "\u0414\u043c\u0438\u0442\u0440\u043e", "city": "\u6771\u4eac"}`,
    );
    // json.dumps("\u2028\u2029 \x7f \ud800 \udfff ÿ Ā")
    expect(pythonJsonDumps('\u2028\u2029 \u007f \ud800 \udfff ÿ Ā')).toBe(String.raw`"\u2028\u2029 \u007f \ud800 \udfff \u00ff \u0100"`);
    // json.dumps("🔥💥") — two astral characters, four escapes
    expect(pythonJsonDumps('🔥💥')).toBe(String.raw`"\ud83d\udd25\ud83d\udca5"`);
  });

  it('writes control characters with short escapes where JSON has them, \\u00XX otherwise, and leaves printable ASCII alone', () => {
    // json.dumps("tab\there\nnew \"q\" back\\slash \b\f\r")
    expect(pythonJsonDumps('tab\there\nnew "q" back\\slash \b\f\r')).toBe(String.raw`"tab\there\nnew \"q\" back\\slash \b\f\r"`);
    // json.dumps("\x00\x01\x1f")
    expect(pythonJsonDumps('\u0000\u0001\u001f')).toBe(String.raw`"\u0000\u0001\u001f"`);
    // json.dumps(" /<>&'~")
    expect(pythonJsonDumps(" /<>&'~")).toBe(`" /<>&'~"`);
  });

  it('writes integers as ints at any size, and other numbers as Python’s float repr', () => {
    // json.dumps([0, -1, 2026, 9007199254740993, 10**21]) — the last two as a bigint and as a JS number
    expect(pythonJsonDumps([0, -1, 2026, 9_007_199_254_740_993n, 1e21])).toBe('[0, -1, 2026, 9007199254740993, 1000000000000000000000]');
    // json.dumps([0.5, -2.25, 0.1, 1/3, 1e-05, 1.5e-07, 0.0001, 0.000123, 123.456, 5e-324, 123456789012345.67])
    expect(pythonJsonDumps([0.5, -2.25, 0.1, 1 / 3, 1e-5, 1.5e-7, 0.0001, 0.000123, 123.456, 5e-324, 123_456_789_012_345.67])).toBe(
      '[0.5, -2.25, 0.1, 0.3333333333333333, 1e-05, 1.5e-07, 0.0001, 0.000123, 123.456, 5e-324, 123456789012345.67]',
    );
    // json.dumps([float("nan"), float("inf"), -float("inf")])
    expect(pythonJsonDumps([Number.NaN, Infinity, -Infinity])).toBe('[NaN, Infinity, -Infinity]');
    // -0 has no fractional part: an int, json.dumps(0)
    expect(pythonJsonDumps(-0)).toBe('0');
  });

  it('writes top-level scalars, None for undefined, and leaves out properties holding undefined', () => {
    expect([pythonJsonDumps('x'), pythonJsonDumps(null), pythonJsonDumps(true), pythonJsonDumps(undefined)]).toEqual(['"x"', 'null', 'true', 'null']);
    expect(pythonJsonDumps({ kept: 1, gone: undefined, list: [undefined] })).toBe('{"kept": 1, "list": [null]}');
    expect(pythonJsonDumps({ at: new Date(Date.UTC(2026, 10, 23)) })).toBe('{"at": "2026-11-23T00:00:00.000Z"}');
  });

  it('refuses what Python cannot serialize: functions, symbols, circular references', () => {
    const loop: Record<string, unknown> = { name: 'loop' };
    loop.self = loop;
    expect(() => pythonJsonDumps(loop)).toThrow(new TypeError('Circular reference detected'));
    expect(() => pythonJsonDumps({ run: () => 1 })).toThrow(new TypeError('Object of type function is not JSON serializable'));
    expect(() => pythonJsonDumps([Symbol('s')])).toThrow(TypeError);
    // The same object twice, not inside itself, is no loop.
    const shared = { id: 1 };
    expect(pythonJsonDumps([shared, { again: shared }])).toBe('[{"id": 1}, {"again": {"id": 1}}]');
  });

  it('for any JSON value: one line of printable ASCII that parses back to the same value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = pythonJsonDumps(value);
        expect(text).toMatch(/^[\u0020-\u007e]*$/);
        // -0 comes back as 0, as Python's int would.
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
      }),
      { numRuns: 500 },
    );
  });
});
