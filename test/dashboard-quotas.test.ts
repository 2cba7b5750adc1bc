// Issue #33, part 3: the dashboard's quotas page in a real browser (Debian's Chromium, playwright-core),
// against a real Klym server over the fake grynya. Tasks run the real agent loop on a scripted model that
// spends its first step (850 tokens in, 40 out: $1.05 at the prices below) and then waits at a gate the
// test opens. A principal sees its own row; an admin every configured principal's, the others summed.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserPages, gatedRunner, logIn, startTask } from './support/dashboard.ts';
import { startOidcIssuer, type OidcIssuer } from './support/oidc-issuer.ts';
import { startHarness, type ServerHarness } from './support/server-harness.ts';

const TOKENS = { alice: 'alice-token-0123456789abcdef', bob: 'bob-token-0123456789abcdef', ops: 'ops-token-0123456789abcdef' };
const RESOURCE = 'https://klym.example/mcp';

let issuer: OidcIssuer;
let harness: ServerHarness;
let base: string;
const runner = gatedRunner();
const { newPage } = browserPages();

beforeAll(async () => {
  issuer = await startOidcIssuer();
  harness = await startHarness({
    auth: { tokens: TOKENS, admins: ['ops'], oauth: { issuer: issuer.issuer, resource: RESOURCE } },
    tasks: {
      run: runner.run,
      maxConcurrent: 4,
      prices: { 'scripted:script': { inputPerMillion: 1_000, outputPerMillion: 5_000 } },
      perPrincipal: { maxRunning: 1, maxQueued: 2, maxTokensPerDay: 100_000, overrides: { bob: { maxRunning: 3, maxUsdPerDay: 5 } } },
    },
  });
  base = harness.server.url;
}, 60_000);
afterAll(async () => {
  await harness?.cleanup();
  await issuer?.close();
});

/** What a row's cell shows: the use, and its limit (`of …`) when there is one. */
async function cell(page: Page, principal: string, kind: 'running' | 'queued' | 'tokens' | 'usd'): Promise<{ used: string | null; limit: string | null }> {
  const td = page.locator(`#principals tr[data-principal="${principal}"] td.${kind}`);
  const limit = td.locator('.limit');
  return { used: await td.locator('.used').textContent(), limit: (await limit.count()) === 0 ? null : await limit.textContent() };
}

describe("the dashboard's quotas", () => {
  it('shows a principal its own tasks running and waiting and its spend today beside its limits, kept live; an admin every configured principal and the others summed', async () => {
    await startTask(base, TOKENS.alice, 'alice 1');
    await startTask(base, TOKENS.alice, 'alice 2');
    await startTask(base, TOKENS.bob, 'bob 1');
    // An OAuth subject: a principal the configuration does not name.
    const carol = await issuer.sign({ aud: RESOURCE, sub: 'carol-of-oauth', scope: 'klym:start klym:read klym:cancel' });
    await startTask(base, carol, 'carol 1');

    const page = await newPage();
    await logIn(page, base, TOKENS.alice);
    await page.locator('nav a', { hasText: 'Quotas' }).click();
    await page.locator('#principals').waitFor();
    expect(await page.locator('nav a[aria-current="page"]').textContent()).toBe('Quotas');
    // Her first task's first step is counted once the store has it; the page polls until then.
    await expect.poll(async () => (await cell(page, 'alice', 'tokens')).used, { timeout: 15_000 }).toBe('890');
    expect(await cell(page, 'alice', 'tokens')).toEqual({ used: '890', limit: 'of 100,000' });
    expect(await cell(page, 'alice', 'usd')).toEqual({ used: '$1.05', limit: null });
    expect(await cell(page, 'alice', 'running')).toEqual({ used: '1', limit: 'of 1' });
    expect(await cell(page, 'alice', 'queued')).toEqual({ used: '1', limit: 'of 2' });
    // Her own row only: not another principal's, nor the others'.
    expect(await page.locator('#principals tr[data-principal]').count()).toBe(1);
    expect(await page.locator('main').textContent()).not.toContain('bob');

    // Her first task ends, her second takes its turn: the page follows without a reload.
    runner.open('alice 1');
    await expect
      .poll(async () => [(await cell(page, 'alice', 'queued')).used, (await cell(page, 'alice', 'running')).used], { timeout: 15_000 })
      .toEqual(['0', '1']);
    // The first task's three steps (3,740 tokens) and the second's first (890).
    await expect.poll(async () => (await cell(page, 'alice', 'tokens')).used, { timeout: 15_000 }).toBe('4,630');

    const admin = await newPage();
    await logIn(admin, base, TOKENS.ops);
    await admin.goto(`${base}/dashboard/principals`);
    await admin.locator('#principals tr[data-principal="other"]').waitFor();
    const rows = await admin.locator('#principals tr[data-principal]').evaluateAll((found) => found.map((row) => row.getAttribute('data-principal')));
    expect(rows).toEqual(['alice', 'bob', 'ops', 'other']);
    expect(await cell(admin, 'bob', 'running')).toEqual({ used: '1', limit: 'of 3' });
    await expect.poll(async () => (await cell(admin, 'bob', 'usd')).used, { timeout: 15_000 }).toBe('$1.05');
    expect((await cell(admin, 'bob', 'usd')).limit).toBe('of $5.00');
    expect(await cell(admin, 'ops', 'running')).toEqual({ used: '0', limit: 'of 1' });
    expect(await cell(admin, 'other', 'running')).toEqual({ used: '1', limit: null });
    expect(await cell(admin, 'other', 'queued')).toEqual({ used: '0', limit: null });
    // The others are summed: an OAuth subject is never named.
    expect(await admin.locator('main').textContent()).not.toContain('carol-of-oauth');
  });

  it('asks for a login first, as every page does', async () => {
    const page = await fetch(`${base}/dashboard/principals`, { redirect: 'manual' });
    expect(page.status).toBe(303);
    expect(page.headers.get('location')).toBe('/dashboard/login?next=%2Fdashboard%2Fprincipals');
    expect((await fetch(`${base}/dashboard/parts/principals`)).status).toBe(401);
  });
});
