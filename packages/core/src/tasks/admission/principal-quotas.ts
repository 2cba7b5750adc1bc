import { KlymError } from '../../errors.ts';
import type { DaySpend } from '../store/task-types.ts';
import { positiveInteger, positiveNumber } from '../../internal/positive.ts';

/**
 * Limits on one principal's tasks (`tasks.perPrincipal`, and each of its overrides). A limit left out is no
 * limit of the principal's own; the server's (`maxConcurrent`, `maxQueued`) hold for everyone together.
 * Spend per day counts every run of the principal's from 00:00 UTC, across restarts (it is kept in the store).
 */
export interface PrincipalLimits {
  /** Of its tasks, how many run at once, at most; the rest wait their turn (none is refused). @default no limit */
  readonly maxRunning?: number;
  /** Of its tasks, how many wait as `pending`, at most; a start past it is refused with `QUOTA_EXCEEDED`. @default no limit */
  readonly maxQueued?: number;
  /**
   * Tokens (input plus output, map calls included) its runs may spend in a day (UTC). Once spent, a start is
   * refused with `QUOTA_EXCEEDED` until the day turns, a waiting task ends so when its turn comes, and a run
   * under way stops after its step as a spent budget stops it (`budget:tokensPerDay`). @default no limit
   */
  readonly maxTokensPerDay?: number;
  /** USD its runs may spend in a day (UTC), priced as `maxCostUsd` is (a model without a price counts nothing); as `maxTokensPerDay`. @default no limit */
  readonly maxUsdPerDay?: number;
}

/** The name of one of {@link PrincipalLimits}, as a `QUOTA_EXCEEDED` error's `quota` gives it. */
export type QuotaName = keyof PrincipalLimits;

/** Limits for every principal, and for some by name (`TaskManagerOptions.perPrincipal`). */
export interface PerPrincipalOptions extends PrincipalLimits {
  /**
   * Limits of principals by name (a static token's name, an OAuth subject), each key replacing the one above
   * for that principal alone, e.g. a batch principal allowed more: `{ batch: { maxQueued: 500 } }`. @default {}
   */
  readonly overrides?: Readonly<Record<string, PrincipalLimits>>;
}

/** One principal's limits, with the option each came from (for a refusal's message). */
export interface ResolvedLimits {
  readonly limits: PrincipalLimits;
  /** The option a limit came from, by quota: `tasks.perPrincipal.maxQueued`, `tasks.perPrincipal.overrides.<name>.maxQueued`. */
  readonly sources: Readonly<Partial<Record<QuotaName, string>>>;
}

/** What a principal may run and queue, and what it runs and queues now. */
export interface PrincipalUsage {
  readonly principal: string;
  readonly limits: PrincipalLimits;
  /** Its tasks `running` (on a shared queue, in every process). */
  readonly running: number;
  /** Its tasks waiting as `pending`. */
  readonly queued: number;
  /** What its runs spent today (UTC), and when the day turns (ISO 8601). */
  readonly today: { readonly spent: DaySpend; readonly resetsAt: string };
}

/** A caller's quotas and use, as `describe_capabilities` and `GET /api/quota` give them. */
export interface QuotaView {
  readonly principal: string;
  /** Its limits; one left out is none of its own (the server's `max_queued` still holds for everyone together). */
  readonly quotas: { readonly max_running?: number; readonly max_queued?: number; readonly max_tokens_per_day?: number; readonly max_usd_per_day?: number };
  readonly use: { readonly running: number; readonly queued: number; readonly tokens_today: number; readonly usd_today: number };
  /** When today's spend starts again from zero (00:00 UTC). */
  readonly day_resets_at: string;
}

const QUOTA_NAMES: readonly QuotaName[] = ['maxRunning', 'maxQueued', 'maxTokensPerDay', 'maxUsdPerDay'];
/** The limits that may be fractions: USD. */
const FRACTIONAL: ReadonlySet<QuotaName> = new Set(['maxUsdPerDay']);

/**
 * Checks `perPrincipal` once and answers each principal's limits: an override's keys over the defaults.
 * @throws {KlymError} `CONFIG_INVALID` naming the option when a limit is not a positive integer
 */
export function resolvePrincipalLimits(options: PerPrincipalOptions = {}): (principal: string) => ResolvedLimits {
  const base = checked('perPrincipal', options);
  const overrides = Object.entries(options.overrides ?? {}).map(([name, limits]) => [name, checked(`perPrincipal.overrides.${name}`, limits)] as const);
  const resolve = (override: PrincipalLimits | undefined, principal: string): ResolvedLimits => {
    const limits: { -readonly [Name in QuotaName]?: number } = {};
    const sources: Partial<Record<QuotaName, string>> = {};
    for (const name of QUOTA_NAMES) {
      const own = override?.[name];
      const value = own ?? base[name];
      if (value === undefined) continue;
      limits[name] = value;
      sources[name] = own === undefined ? `tasks.perPrincipal.${name}` : `tasks.perPrincipal.overrides.${principal}.${name}`;
    }
    return { limits, sources };
  };
  // Every principal without an override shares one answer.
  const common = resolve(undefined, '');
  const named = new Map(overrides.map(([name, limits]) => [name, resolve(limits, name)]));
  return (principal) => named.get(principal) ?? common;
}

/** The refusal of a start that would pass `principal`'s `maxQueued`; `retryAfterMs`: when one of its waiting tasks has likely started. */
export function queuedQuotaExceeded(principal: string, resolved: ResolvedLimits, queued: number, retryAfterMs: number): KlymError {
  const limit = resolved.limits.maxQueued as number;
  return new KlymError(
    'QUOTA_EXCEEDED',
    `Principal ${principal} has ${queued} ${queued === 1 ? 'task' : 'tasks'} waiting, its maxQueued is ${limit} (${resolved.sources.maxQueued}): ` +
      'try again when one of them has started; other callers are not held back',
    { quota: 'maxQueued', limit, used: queued, retryAfterMs },
  );
}

/** `limits`, checked: each a positive integer (USD a positive number). @throws {KlymError} `CONFIG_INVALID` naming the option at `where` */
function checked(where: string, limits: PrincipalLimits): PrincipalLimits {
  for (const name of QUOTA_NAMES) {
    const value = limits[name];
    if (value === undefined) continue;
    (FRACTIONAL.has(name) ? positiveNumber : positiveInteger)(`${where}.${name}`, value);
  }
  return limits;
}

/** A principal's quotas and use, in the words of the tools. */
export function viewQuota(usage: PrincipalUsage): QuotaView {
  const { maxRunning, maxQueued, maxTokensPerDay, maxUsdPerDay } = usage.limits;
  return {
    principal: usage.principal,
    quotas: {
      ...(maxRunning === undefined ? {} : { max_running: maxRunning }),
      ...(maxQueued === undefined ? {} : { max_queued: maxQueued }),
      ...(maxTokensPerDay === undefined ? {} : { max_tokens_per_day: maxTokensPerDay }),
      ...(maxUsdPerDay === undefined ? {} : { max_usd_per_day: maxUsdPerDay }),
    },
    use: { running: usage.running, queued: usage.queued, tokens_today: usage.today.spent.tokens, usd_today: Number(usage.today.spent.usd.toFixed(6)) },
    day_resets_at: usage.today.resetsAt,
  };
}
