import type { BudgetHit } from '../../agent/budget.ts';
import { KlymError } from '../../errors.ts';
import type { PrincipalLimits, ResolvedLimits } from './principal-quotas.ts';
import type { DaySpend, TaskStore } from '../store/task-types.ts';

const DAY_MS = 86_400_000;

/** The UTC date `time` falls on (`YYYY-MM-DD`), and when the next day begins (ms since the epoch). */
export function dayOf(time: number): { readonly day: string; readonly turnsAt: number } {
  const start = Math.floor(time / DAY_MS) * DAY_MS;
  return { day: new Date(start).toISOString().slice(0, 10), turnsAt: start + DAY_MS };
}

/** One run's count of its principal's day: what the day had spent when it began, and what it spent since. */
export interface SpendMeter {
  /** The daily limit the principal had reached before the run began, if any. */
  readonly reached: BudgetHit | undefined;
  /**
   * Counts what the run spent (a step, a map) in the store. Answers at once the daily limit that the day's
   * total as this run knows it has reached (so that a run stops right after the step that passed it);
   * `onHit` hears later of one that the store's total, the principal's other runs included, reached.
   */
  add(spend: DaySpend, onHit: (hit: BudgetHit) => void): BudgetHit | undefined;
  /** Whether the principal has a daily limit: only then is there anything to wait for. */
  readonly limited: boolean;
  /** Resolves once every `add` so far has its store's answer (and its `onHit` was called). */
  settled(): Promise<void>;
}

const NOTHING: DaySpend = { tokens: 0, usd: 0 };

/** The daily limit of `limits` that `spent` has reached, if any. */
function hitOf(limits: PrincipalLimits, spent: DaySpend): BudgetHit | undefined {
  if (limits.maxTokensPerDay !== undefined && spent.tokens >= limits.maxTokensPerDay)
    return { name: 'tokensPerDay', limit: limits.maxTokensPerDay, used: spent.tokens };
  if (limits.maxUsdPerDay !== undefined && spent.usd >= limits.maxUsdPerDay) return { name: 'usdPerDay', limit: limits.maxUsdPerDay, used: spent.usd };
  return undefined;
}

const limited = (limits: PrincipalLimits): boolean => limits.maxTokensPerDay !== undefined || limits.maxUsdPerDay !== undefined;

/** What each principal's runs spend in a day, against its `maxTokensPerDay` and `maxUsdPerDay` (issue #33). */
export interface DailySpend {
  /** A meter for a run of `principal`'s; reads the store only when the principal has a daily limit. */
  meter(principal: string): Promise<SpendMeter>;
  /** The daily limit `principal` has reached today, if any; reads the store only when it has one. */
  reached(principal: string): Promise<BudgetHit | undefined>;
  /** What `principal` spent today, and when the day turns. */
  today(principal: string): Promise<{ readonly spent: DaySpend; readonly resetsAt: string }>;
  /** The refusal of a start (or of a waiting task's run) by `principal`, whose day's `hit` is spent. */
  refusal(principal: string, hit: BudgetHit, doing: string): KlymError;
}

/** How long after a failed write of spend it is tried again, at first; doubled each failure, up to {@link RETRY_MAX_MS}. */
const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 30_000;

const keyOf = (principal: string, day: string): string => `${principal}\n${day}`;

const plus = (one: DaySpend, other: DaySpend): DaySpend => ({ tokens: one.tokens + other.tokens, usd: one.usd + other.usd });

/**
 * Spend the store could not take (it was down): kept per principal and day, counted by this process as if
 * written, and written when the store answers again — retried with a growing delay until it does.
 */
function createUnwrittenSpend(store: TaskStore): { keep(principal: string, day: string, spend: DaySpend): void; of(principal: string, day: string): DaySpend } {
  const kept = new Map<string, { readonly principal: string; readonly day: string; spend: DaySpend }>();
  // Being written: still counted here until the store has taken it.
  const writing = new Map<string, DaySpend>();
  let delayMs = RETRY_FIRST_MS;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const flush = async (): Promise<void> => {
    timer = undefined;
    // Taken out first: a spend kept meanwhile, or kept again on a failure, waits for the next try.
    const due = Array.from(kept.values());
    kept.clear();
    for (const entry of due) {
      const key = keyOf(entry.principal, entry.day);
      writing.set(key, entry.spend);
      try {
        await store.addSpend(entry.principal, entry.day, entry.spend);
        delayMs = RETRY_FIRST_MS;
      } catch {
        // Still down: kept again (with whatever was kept meanwhile), for the next try.
        keep(entry.principal, entry.day, entry.spend, false);
        delayMs = Math.min(delayMs * 2, RETRY_MAX_MS);
      } finally {
        writing.delete(key);
      }
    }
    schedule();
  };
  const schedule = (): void => {
    if (timer !== undefined || kept.size === 0) return;
    timer = setTimeout(() => void flush(), delayMs);
    // Spend kept when the process ends is lost with it: it never holds a process open.
    timer.unref();
  };
  const keep = (principal: string, day: string, spend: DaySpend, retry = true): void => {
    const key = keyOf(principal, day);
    const entry = kept.get(key);
    if (entry === undefined) kept.set(key, { principal, day, spend });
    else entry.spend = plus(entry.spend, spend);
    if (retry) schedule();
  };
  return {
    keep,
    of: (principal, day) => plus(kept.get(keyOf(principal, day))?.spend ?? NOTHING, writing.get(keyOf(principal, day)) ?? NOTHING),
  };
}

/**
 * Counts spend per principal and day in `store` (so that it holds across restarts and processes), the day
 * being the UTC date of `now()`. Spend the store fails to take is kept and written once it answers again,
 * and counted meanwhile by this process: a quota holds through a store's outage.
 */
export function createDailySpend(store: TaskStore, limitsOf: (principal: string) => ResolvedLimits, now: () => number): DailySpend {
  const unwritten = createUnwrittenSpend(store);
  /** The day's spend: the store's total, and what this process spent that the store has not taken yet. */
  const spendOf = async (principal: string, day: string): Promise<DaySpend> => plus(await store.spendOf(principal, day), unwritten.of(principal, day));
  return {
    async meter(principal) {
      const { limits } = limitsOf(principal);
      let { day } = dayOf(now());
      let known = limited(limits) ? await spendOf(principal, day) : NOTHING;
      let answered: Promise<unknown> = Promise.resolve();
      return {
        reached: hitOf(limits, known),
        limited: limited(limits),
        settled: async () => void (await answered),
        add(spend, onHit) {
          if (!(spend.tokens > 0 || spend.usd > 0)) return undefined;
          const today = dayOf(now()).day;
          // The day turned during the run: what it spends now counts from zero.
          if (today !== day) [day, known] = [today, NOTHING];
          known = { tokens: known.tokens + spend.tokens, usd: known.usd + spend.usd };
          const answer = store.addSpend(principal, today, spend).then(
            (stored) => {
              const total = plus(stored, unwritten.of(principal, today));
              // Answers may come back out of order: the day's total only grows.
              if (today === day) known = { tokens: Math.max(known.tokens, total.tokens), usd: Math.max(known.usd, total.usd) };
              const hit = hitOf(limits, total);
              if (hit !== undefined) onHit(hit);
            },
            // The store is down: the spend is kept, counted here, and written when it is back; the run goes on.
            () => unwritten.keep(principal, today, spend),
          );
          answered = answered.then(() => answer);
          return hitOf(limits, known);
        },
      };
    },
    async reached(principal) {
      const { limits } = limitsOf(principal);
      if (!limited(limits)) return undefined;
      return hitOf(limits, await spendOf(principal, dayOf(now()).day));
    },
    async today(principal) {
      const { day, turnsAt } = dayOf(now());
      return { spent: await spendOf(principal, day), resetsAt: new Date(turnsAt).toISOString() };
    },
    refusal(principal, hit, doing) {
      const quota = hit.name === 'tokensPerDay' ? 'maxTokensPerDay' : 'maxUsdPerDay';
      const source = limitsOf(principal).sources[quota];
      const used = hit.name === 'tokensPerDay' ? `${hit.used} tokens` : `$${hit.used.toFixed(4)}`;
      const { turnsAt } = dayOf(now());
      return new KlymError(
        'QUOTA_EXCEEDED',
        `Principal ${principal} has spent ${used} today, its ${quota} is ${hit.limit} (${source}): ${doing}; ` +
          `the day's spend starts again at ${new Date(turnsAt).toISOString()}; other callers are not held back`,
        { quota, limit: hit.limit, used: hit.used, retryAfterMs: turnsAt - now() },
      );
    },
  };
}
