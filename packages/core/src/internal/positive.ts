import { KlymError } from '../errors.ts';

/** What a refused value is called by: `INVALID_ARGUMENT` for a call's argument, `CONFIG_INVALID` for an option. */
type RefusalCode = 'CONFIG_INVALID' | 'INVALID_ARGUMENT';

/** A value as a message shows it: a number as written, anything else (a string, `null`) as JSON. */
const shown = (value: unknown): string => (typeof value === 'number' ? String(value) : (JSON.stringify(value) ?? String(value)));

/**
 * `value` when it is a positive (safe) integer no larger than `max`, the check every count, size and interval
 * given in code gets.
 * @throws {KlymError} `code` (`CONFIG_INVALID` unless told), naming the option and the value:
 * ``Expected `limit` to be a positive integer, got 0`` (with ` of at most max` when `max` is given).
 */
export function positiveInteger(name: string, value: number, code: RefusalCode = 'CONFIG_INVALID', max = Number.MAX_SAFE_INTEGER): number {
  if (!Number.isSafeInteger(value) || value <= 0 || value > max) {
    const most = max === Number.MAX_SAFE_INTEGER ? '' : ` of at most ${max}`;
    throw new KlymError(code, `Expected \`${name}\` to be a positive integer${most}, got ${shown(value)}`);
  }
  return value;
}

/**
 * `value` when it is a positive finite number.
 * @throws {KlymError} `code` (`CONFIG_INVALID` unless told): ``Expected `ttlMs` to be a positive number, got -1``.
 */
export function positiveNumber(name: string, value: number, code: RefusalCode = 'CONFIG_INVALID'): number {
  if (!Number.isFinite(value) || value <= 0) throw new KlymError(code, `Expected \`${name}\` to be a positive number, got ${shown(value)}`);
  return value;
}
