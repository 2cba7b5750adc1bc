import { DEFAULT_MAX_STEPS, MAX_TIMER_MS } from '../defaults.ts';
import { KlymError } from '../errors.ts';
import type { AgentBudget, AgentRunResult, AgentUsage, BudgetName, ModelPrice } from './types.ts';
import { costOf } from './usage.ts';
import { positiveInteger, positiveNumber } from '../internal/positive.ts';
import { countText as tokens } from '../internal/count-text.ts';

/** A run's limits with the defaults filled in. */
export type ResolvedBudget = AgentRunResult['budget'];

/** A budget that ran out: which, its limit, and what was used. */
export interface BudgetHit {
  readonly name: BudgetName;
  readonly limit: number;
  readonly used: number;
}

/** The longest time budget a timer can hold: 2^31 - 1 ms (defined once, in `defaults.ts`). */
const MAX_TIMEOUT_MS = MAX_TIMER_MS;

/** Steps of a run when the caller sets none (defined once, in `defaults.ts`). */
export { DEFAULT_MAX_STEPS };

function positive(name: keyof AgentBudget, value: number | undefined, integer: boolean): void {
  if (value !== undefined) (integer ? positiveInteger : positiveNumber)(name, value);
}

/**
 * Checks a run's budget and fills in the defaults (25 steps, the rest unlimited).
 * @throws {KlymError} `CONFIG_INVALID` naming the option and the value, e.g. ``Expected `maxSteps` to be a positive integer, got -1``.
 */
export function resolveBudget(budget: AgentBudget = {}): ResolvedBudget {
  positive('maxSteps', budget.maxSteps, true);
  positive('maxTokens', budget.maxTokens, true);
  positive('maxCostUsd', budget.maxCostUsd, false);
  positive('timeoutMs', budget.timeoutMs, true);
  // A timer longer than this fires at once (Node clamps it to 1 ms): the run would end as it starts.
  if (budget.timeoutMs !== undefined && budget.timeoutMs > MAX_TIMEOUT_MS) {
    throw new KlymError('CONFIG_INVALID', `Expected \`timeoutMs\` to be at most ${MAX_TIMEOUT_MS} (about 24.8 days), got ${budget.timeoutMs}`);
  }
  return {
    maxSteps: budget.maxSteps ?? DEFAULT_MAX_STEPS,
    ...(budget.maxTokens === undefined ? {} : { maxTokens: budget.maxTokens }),
    ...(budget.maxCostUsd === undefined ? {} : { maxCostUsd: budget.maxCostUsd }),
    ...(budget.timeoutMs === undefined ? {} : { timeoutMs: budget.timeoutMs }),
  };
}

/**
 * The token or cost budget that the run's use so far has reached, if any. Cost counts only when the
 * model has a price (`costUsd` defined).
 */
export function spentBudget(budget: ResolvedBudget, usage: AgentUsage, costUsd: number | undefined): BudgetHit | undefined {
  if (budget.maxTokens !== undefined && usage.totalTokens >= budget.maxTokens) return { name: 'tokens', limit: budget.maxTokens, used: usage.totalTokens };
  if (budget.maxCostUsd !== undefined && costUsd !== undefined && costUsd >= budget.maxCostUsd)
    return { name: 'cost', limit: budget.maxCostUsd, used: costUsd };
  return undefined;
}

/** The budget kept outside the run that `signal` reports spent (`RunAgentOptions.budgetSignal`), if any. */
export function outsideBudget(signal: AbortSignal | undefined): BudgetHit | undefined {
  if (signal?.aborted !== true) return undefined;
  const reason = signal.reason as Partial<BudgetHit> | undefined;
  // A signal aborted without a hit of its own still stops the run, as a spent budget of unknown size.
  return typeof reason?.name === 'string' ? (reason as BudgetHit) : { name: 'tokensPerDay', limit: 0, used: 0 };
}

/** A spent budget in words, for whoever is told why something did not go on. */
export function describeBudgetHit(hit: BudgetHit): string {
  switch (hit.name) {
    case 'cost':
      return `the run's cost budget is spent: $${hit.used.toFixed(4)} of $${hit.limit}`;
    case 'tokens':
      return `the run's token budget is spent: ${hit.used} of ${hit.limit} tokens`;
    case 'tokensPerDay':
      return `its principal's tokens for the day are spent: ${hit.used} of ${hit.limit} (maxTokensPerDay)`;
    case 'usdPerDay':
      return `its principal's spend for the day is spent: $${hit.used.toFixed(4)} of $${hit.limit} (maxUsdPerDay)`;
    case 'steps':
      return `the run's step budget is spent: ${hit.used} of ${hit.limit} steps`;
    case 'time':
      return `the run's time budget is spent: ${hit.used} of ${hit.limit} ms`;
  }
}

/** What a call under way holds of its run's budget, from before it is sent until its usage is counted. */
export interface BudgetHold {
  /** Gives the hold back, once the call's usage (or its estimate) is counted in the run's. */
  release(): void;
}

/**
 * A run's token and cost budgets as its calls under way hold them (a map's calls, `artifacts/artifact-map.ts`):
 * a call is sent only when what it may spend fits beside what the run spent and what the calls under way hold,
 * so that calls in flight at once cannot together pass a budget that each alone would not.
 */
export interface BudgetHolds {
  /**
   * Holds `most`, the most a call may spend (its counted input, its output allowance), when it fits beside
   * what was spent and the holds not released; otherwise why not, in words, and nothing is held.
   */
  hold(most: AgentUsage): BudgetHold | { readonly reason: string };
  /**
   * The budget that refused a hold, as a hit with what was spent at the time of asking: the run could not pay for
   * the work it was doing, and ends on it as on a spent budget. `undefined` while no hold was refused.
   */
  refused(): BudgetHit | undefined;
}

/**
 * The holds of a run whose budget is `budget`, its usage `spent()` (read at each hold: the run counts each
 * call's usage as it ends), priced at `price` as the run prices it (no price: only the token budget holds).
 */
export function createBudgetHolds(budget: ResolvedBudget, price: ModelPrice | undefined, spent: () => AgentUsage): BudgetHolds {
  let heldTokens = 0;
  let heldUsd = 0;
  let refused: 'tokens' | 'cost' | undefined;
  return {
    hold(most) {
      const usage = spent();
      const usd = costOf(most, price);
      const spentUsd = costOf(usage, price);
      if (budget.maxTokens !== undefined && usage.totalTokens + heldTokens + most.totalTokens > budget.maxTokens) {
        refused ??= 'tokens';
        return {
          reason: `the run's token budget cannot pay for another call: ${tokens(usage.totalTokens)} of ${tokens(budget.maxTokens)} tokens spent, ${tokens(heldTokens)} held by calls under way, and the call may spend ${tokens(most.totalTokens)}`,
        };
      }
      if (budget.maxCostUsd !== undefined && usd !== undefined && spentUsd !== undefined && spentUsd + heldUsd + usd > budget.maxCostUsd) {
        refused ??= 'cost';
        return {
          reason: `the run's cost budget cannot pay for another call: $${spentUsd.toFixed(4)} of $${budget.maxCostUsd} spent, $${heldUsd.toFixed(4)} held by calls under way, and the call may cost $${usd.toFixed(4)}`,
        };
      }
      heldTokens += most.totalTokens;
      heldUsd += usd ?? 0;
      let released = false;
      return {
        release: () => {
          if (released) return;
          released = true;
          heldTokens -= most.totalTokens;
          heldUsd -= usd ?? 0;
        },
      };
    },
    refused() {
      if (refused === undefined) return undefined;
      const usage = spent();
      if (refused === 'tokens') return { name: 'tokens', limit: budget.maxTokens ?? 0, used: usage.totalTokens };
      return { name: 'cost', limit: budget.maxCostUsd ?? 0, used: costOf(usage, price) ?? 0 };
    },
  };
}
