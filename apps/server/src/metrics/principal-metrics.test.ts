import type { PrincipalUsage, TaskService, TaskStatus } from '@klym/core';
import { describe, expect, it } from 'vitest';
import { createKlymMetrics, type KlymMetrics } from './klym-metrics.ts';

type Sample = { readonly name: string; readonly labels: Readonly<Partial<Record<string, string | number>>>; readonly value: number };

/** A scrape's samples (of gauges and counters): `render` reads the service, then the registry gives what that scrape collected. */
async function scrape(metrics: KlymMetrics): Promise<Sample[]> {
  await metrics.render();
  const collected = await metrics.registry.getMetricsAsJSON();
  return collected.flatMap((metric) => metric.values.map((value) => ({ name: metric.name, labels: value.labels, value: value.value })));
}

const valueOf = (samples: readonly Sample[], name: string, labels: Readonly<Record<string, string>> = {}): number | undefined =>
  samples.find((sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value))?.value;

const TOTALS: Record<TaskStatus, number> = { pending: 5, running: 4, input_required: 0, completed: 0, error: 0, cancelled: 0 };

const usageOf = (principal: string, running: number, queued: number): PrincipalUsage => ({
  principal,
  limits: { maxQueued: 3 },
  running,
  queued,
  today: { spent: { tokens: 1_200, usd: 0.25 }, resetsAt: '2026-11-28T00:00:00.000Z' },
});

/** The two reads the metrics make of a service, each answering or failing as the test says. */
function serviceOf(reads: { summary: () => Promise<Record<TaskStatus, number>>; usage: (principal: string) => Promise<PrincipalUsage> }): TaskService {
  return {
    tasks: { summary: reads.summary, usage: (caller: { principal: string }) => reads.usage(caller.principal) },
    pool: { status: () => ({}) },
  } as unknown as TaskService;
}

async function scrapeOf(reads: Parameters<typeof serviceOf>[0]): Promise<{ samples: Sample[]; warnings: string[] }> {
  const warnings: string[] = [];
  const metrics = createKlymMetrics({ principals: ['alice', 'bob'], processMetrics: false, log: (line) => warnings.push(line) });
  metrics.watch(serviceOf(reads));
  return { samples: await scrape(metrics), warnings };
}

describe('the per-principal metrics', () => {
  it('give the named principals their own series and the rest of the totals to `other`', async () => {
    const { samples } = await scrapeOf({
      summary: async () => TOTALS,
      usage: async (principal) => (principal === 'alice' ? usageOf('alice', 2, 1) : usageOf('bob', 1, 0)),
    });
    expect(valueOf(samples, 'klym_principal_tasks', { principal: 'alice', status: 'running' })).toBe(2);
    expect(valueOf(samples, 'klym_principal_tasks', { principal: 'other', status: 'running' })).toBe(1);
    expect(valueOf(samples, 'klym_principal_tasks', { principal: 'other', status: 'pending' })).toBe(4);
    expect(valueOf(samples, 'klym_principal_llm_cost_usd_today', { principal: 'bob' })).toBe(0.25);
    expect(valueOf(samples, 'klym_principal_limit', { principal: 'bob', quota: 'maxQueued' })).toBe(3);
  });

  it("leave a principal's series out of a scrape whose store read failed, and say so; the totals stay", async () => {
    const { samples, warnings } = await scrapeOf({
      summary: async () => TOTALS,
      usage: async () => {
        throw new Error('redis went away');
      },
    });
    for (const name of ['klym_principal_tasks', 'klym_principal_llm_tokens_today', 'klym_principal_llm_cost_usd_today', 'klym_principal_limit']) {
      expect(samples.filter((sample) => sample.name === name)).toEqual([]);
    }
    expect(valueOf(samples, 'klym_tasks', { status: 'running' })).toBe(4);
    expect(warnings.join('\n')).toContain("could not read the principals' use: redis went away");
  });

  it('leave `other` out when the totals could not be read, the named principals in', async () => {
    const { samples } = await scrapeOf({
      summary: async () => {
        throw new Error('no counts');
      },
      usage: async (principal) => usageOf(principal, 1, 0),
    });
    expect(valueOf(samples, 'klym_principal_tasks', { principal: 'alice', status: 'running' })).toBe(1);
    expect(valueOf(samples, 'klym_principal_tasks', { principal: 'other', status: 'running' })).toBeUndefined();
  });

  it('count refusals of unnamed principals as `other`, and an unknown quota as `other`', async () => {
    const metrics = createKlymMetrics({ principals: ['alice'], processMetrics: false });
    metrics.observeRefusal({ principal: 'alice', code: 'QUOTA_EXCEEDED', quota: 'maxTokensPerDay' });
    metrics.observeRefusal({ principal: 'some-oauth-subject', code: 'QUOTA_EXCEEDED', quota: 'maxUsdPerDay' });
    metrics.observeRefusal({ principal: 'alice', code: 'QUOTA_EXCEEDED', quota: 'a quota of a later version' });
    metrics.observeRefusal({ principal: 'alice', code: 'TASK_QUEUE_FULL' });
    const samples = await scrape(metrics);
    expect(valueOf(samples, 'klym_task_refusals_total', { principal: 'alice', quota: 'maxTokensPerDay' })).toBe(1);
    expect(valueOf(samples, 'klym_task_refusals_total', { principal: 'other', quota: 'maxUsdPerDay' })).toBe(1);
    expect(valueOf(samples, 'klym_task_refusals_total', { principal: 'alice', quota: 'other' })).toBe(1);
    expect(valueOf(samples, 'klym_task_refusals_total', { principal: 'alice', quota: 'tasks.maxQueued' })).toBe(1);
    expect(JSON.stringify(samples)).not.toContain('some-oauth-subject');
  });
});
