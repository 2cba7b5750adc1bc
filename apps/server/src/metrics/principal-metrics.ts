import type { PrincipalUsage, QuotaName, TaskRefusal, TaskStatus } from '@klym/core';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ServerLog } from '../server/server-options.ts';
import { OTHER_PRINCIPALS, otherPrincipalsUse } from './principal-use.ts';

/** The per-principal part of the server's metrics (issue #33): tasks, spend today and limits, refusals. */
export interface PrincipalMetrics {
  /** Counts a start refused over a limit (a task manager's `onRefuse`). */
  observeRefusal(refusal: TaskRefusal): void;
  /**
   * Starts the reads of the scrape under way: `readNamed` (the named principals' usage; `undefined` before
   * `watch`) and `totals`, the scrape's one read of the store's counts, which the other gauges share.
   */
  scrape(readNamed: (() => Promise<readonly PrincipalUsage[]>) | undefined, totals: Promise<Readonly<Record<TaskStatus, number>> | undefined>): void;
}

/** The quotas a refusal may name, as `QUOTA_EXCEEDED`'s `quota` does; the queue's own bound is `tasks.maxQueued`. */
const QUOTAS: ReadonlySet<string> = new Set<QuotaName>(['maxRunning', 'maxQueued', 'maxTokensPerDay', 'maxUsdPerDay']);
const LIMITS: readonly QuotaName[] = ['maxRunning', 'maxQueued', 'maxTokensPerDay', 'maxUsdPerDay'];

/**
 * Registers, in `registry`, gauges of each named principal's tasks, spend today and limits, read at each scrape
 * (every other principal summed as `principal="other"`), and a counter of refused starts. `principals` are
 * the only principal labels besides `other`, so the series stay as few as the configuration says.
 */
export function registerPrincipalMetrics(registry: Registry, options: { readonly principals: readonly string[]; readonly log?: ServerLog }): PrincipalMetrics {
  const registers = [registry];
  const named = new Set(options.principals);
  const labelOf = (principal: string): string => (named.has(principal) ? principal : OTHER_PRINCIPALS);
  let reading: Promise<readonly PrincipalUsage[] | undefined> = Promise.resolve(undefined);
  let totals: Promise<Readonly<Record<TaskStatus, number>> | undefined> = Promise.resolve(undefined);

  const tasks = new Gauge({
    name: 'klym_principal_tasks',
    help: 'Tasks waiting (pending) and running, by principal: the configured ones by name, every other as "other" (read from the store at each scrape)',
    labelNames: ['principal', 'status'],
    registers,
    collect: async () => {
      const [usages, counts] = await Promise.all([reading, totals]);
      tasks.reset();
      if (usages === undefined) return;
      for (const usage of usages) {
        tasks.set({ principal: usage.principal, status: 'pending' }, usage.queued);
        tasks.set({ principal: usage.principal, status: 'running' }, usage.running);
      }
      if (counts === undefined) return;
      const others = otherPrincipalsUse(counts, usages);
      tasks.set({ principal: OTHER_PRINCIPALS, status: 'pending' }, others.queued);
      tasks.set({ principal: OTHER_PRINCIPALS, status: 'running' }, others.running);
    },
  });
  const tokens = new Gauge({
    name: 'klym_principal_llm_tokens_today',
    help: "LLM tokens (input plus output) a configured principal's runs spent today (UTC), in every process (read from the store at each scrape)",
    labelNames: ['principal'],
    registers,
    collect: async () => {
      const usages = await reading;
      tokens.reset();
      for (const usage of usages ?? []) tokens.set({ principal: usage.principal }, usage.today.spent.tokens);
    },
  });
  const cost = new Gauge({
    name: 'klym_principal_llm_cost_usd_today',
    help: "What a configured principal's runs cost today (UTC), in USD, in every process (read from the store at each scrape)",
    labelNames: ['principal'],
    registers,
    collect: async () => {
      const usages = await reading;
      cost.reset();
      for (const usage of usages ?? []) cost.set({ principal: usage.principal }, usage.today.spent.usd);
    },
  });
  const limits = new Gauge({
    name: 'klym_principal_limit',
    help: "A configured principal's limits (tasks.perPrincipal and its overrides), by quota; a quota without a limit has no series",
    labelNames: ['principal', 'quota'],
    registers,
    collect: async () => {
      const usages = await reading;
      limits.reset();
      for (const usage of usages ?? []) {
        for (const quota of LIMITS) {
          const limit = usage.limits[quota];
          if (limit !== undefined) limits.set({ principal: usage.principal, quota }, limit);
        }
      }
    },
  });
  const refusals = new Counter({
    name: 'klym_task_refusals_total',
    help:
      'Task starts this process refused over a limit, by principal (configured ones by name, else "other") and quota ' +
      "(maxQueued, maxTokensPerDay, maxUsdPerDay: the principal's; tasks.maxQueued: the whole queue's)",
    labelNames: ['principal', 'quota'],
    registers,
  });

  async function usagesOrNothing(readNamed: () => Promise<readonly PrincipalUsage[]>): Promise<readonly PrincipalUsage[] | undefined> {
    try {
      return await readNamed();
    } catch (error) {
      // Left out of this scrape rather than reported stale, as the task counts are.
      options.log?.(`klym: metrics could not read the principals' use: ${error instanceof Error ? error.message : String(error)}`, 'warning');
      return undefined;
    }
  }

  return {
    observeRefusal(refusal) {
      const quota = refusal.code === 'TASK_QUEUE_FULL' ? 'tasks.maxQueued' : refusal.quota !== undefined && QUOTAS.has(refusal.quota) ? refusal.quota : 'other';
      refusals.inc({ principal: labelOf(refusal.principal), quota });
    },
    scrape(readNamed, counts) {
      totals = counts;
      reading = readNamed === undefined ? Promise.resolve(undefined) : usagesOrNothing(readNamed);
    },
  };
}
