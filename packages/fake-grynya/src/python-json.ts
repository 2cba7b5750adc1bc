/**
 * Every code unit Python's `json.dumps` escapes as `\uXXXX` under `ensure_ascii=True` that `JSON.stringify` leaves
 * as is: DEL and everything past ASCII. An astral character is two UTF-16 code units here, so it comes out as the
 * surrogate pair Python writes for it.
 */
const NON_ASCII = /[\u007f-\uffff]/g;
const HAS_NON_ASCII = /[\u007f-\uffff]/;

/** Python writes `\uXXXX` with lowercase hex digits. */
const escapeCodeUnit = (char: string): string => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * Serializes `value` as Python 3's `json.dumps(value)` does with its default arguments, byte for byte, so that
 * the fake's answers read exactly as grynya-mcp-server's: one line, separators `", "` and `": "`, and
 * `ensure_ascii=True` (every character outside printable ASCII as `\uXXXX` in lowercase hex, an astral one as its
 * surrogate pair, DEL as `\u007f`; `\b \f \n \r \t \" \\` as short escapes).
 *
 * What a JavaScript value cannot tell, and how it is decided:
 * - A number with no fractional part is a Python `int` (`1`, not `1.0`), at any magnitude (`1e21` is written
 *   with all its digits); any other finite number is a `float`, written as Python's `repr` writes it (`0.5`,
 *   `1e-05`, `1.5e-07`). `NaN` and `±Infinity` come out as `NaN`, `Infinity`, `-Infinity` (`allow_nan=True`).
 * - A `bigint` is an `int`; `null` and a top-level or array-held `undefined` are `None` (`null`); an object's
 *   property holding `undefined` is left out, as `JSON.stringify` does.
 * - Keys keep the object's own order, which JavaScript puts integer-like keys first in.
 * - An object with a `toJSON` method is written as what it returns, as `JSON.stringify` does.
 *
 * @throws {TypeError} for a function or symbol, and for a circular reference, as Python raises for what it cannot
 *   serialize.
 * @example
 * ```ts
 * pythonJsonDumps({ a: [1, 'é', '😀'], b: null, c: true })
 * // '{"a": [1, "\\u00e9", "\\ud83d\\ude00"], "b": null, "c": true}'
 * ```
 */
export function pythonJsonDumps(value: unknown): string {
  return dump(value, []);
}

/** A string as Python writes it with `ensure_ascii=True`; `JSON.stringify` already escapes the same control characters and lone surrogates alike. */
export function pythonJsonString(value: string): string {
  const json = JSON.stringify(value);
  return HAS_NON_ASCII.test(json) ? json.replace(NON_ASCII, escapeCodeUnit) : json;
}

/** `open` holds the containers being written, outermost first: few, so a list is quicker than a set. */
function dump(value: unknown, open: object[]): string {
  switch (typeof value) {
    case 'string':
      return pythonJsonString(value);
    case 'number':
      return pythonNumber(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      return value.toString();
    case 'undefined':
      return 'null';
    case 'function':
    case 'symbol':
      throw new TypeError(`Object of type ${typeof value} is not JSON serializable`);
    default:
      break;
  }
  if (value === null) return 'null';
  const object = value as object;
  if (typeof (object as { toJSON?: unknown }).toJSON === 'function') return dump((object as { toJSON(): unknown }).toJSON(), open);
  if (open.includes(object)) throw new TypeError('Circular reference detected');
  open.push(object);
  // Concatenation, not arrays joined: a 120,000-row answer is written in a third of the time.
  let text: string;
  if (Array.isArray(object)) {
    text = '[';
    for (let index = 0; index < object.length; index++) text += (index === 0 ? '' : ', ') + dump(object[index], open);
    text += ']';
  } else {
    text = '{';
    let first = true;
    for (const key of Object.keys(object)) {
      const member = (object as Record<string, unknown>)[key];
      if (member === undefined) continue;
      text += (first ? '' : ', ') + pythonJsonString(key) + ': ' + dump(member, open);
      first = false;
    }
    text += '}';
  }
  open.pop();
  return text;
}

function pythonNumber(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return 'Infinity';
  if (value === -Infinity) return '-Infinity';
  if (Number.isInteger(value)) return Number.isSafeInteger(value) ? String(value) : BigInt(value).toString();
  return pythonFloatRepr(value);
}

/**
 * A non-integral finite number as Python's `float.__repr__` writes it: the same shortest round-trip digits as
 * JavaScript, but in positional notation only while the decimal exponent is from -4 to 15 (JavaScript: -7 to 20),
 * and an exponent of at least two digits with its sign (`1e-05`, not `1e-5`).
 */
function pythonFloatRepr(value: number): string {
  // `toExponential()` with no argument gives the shortest digits that round-trip, as Python's repr does.
  const [mantissa = '', exponentText = ''] = value.toExponential().split('e');
  const exponent = Number(exponentText);
  const sign = mantissa.startsWith('-') ? '-' : '';
  const digits = mantissa.replace('-', '').replace('.', '');
  if (exponent < -4 || exponent >= 16) {
    const significand = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${significand}e${exponent < 0 ? '-' : '+'}${String(Math.abs(exponent)).padStart(2, '0')}`;
  }
  if (exponent < 0) return `${sign}0.${'0'.repeat(-exponent - 1)}${digits}`;
  // Not an integer, so there are digits past the point.
  return `${sign}${digits.slice(0, exponent + 1)}.${digits.slice(exponent + 1)}`;
}
