// The dashboard in a real browser: Debian's headless Chromium driven by playwright-core, against a real
// Klym server over the fake grynya, its tasks run by the real agent loop on a scripted model whose
// second step waits until the test lets it go on. `KLYM_SCREENSHOT=1` also writes the timeline's
// screenshot to docs/dashboard-timeline.png (README shows it).
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserPages, gatedRunner, logIn, startTask, taskStatus } from './support/dashboard.ts';
import { startHarness, type ServerHarness } from './support/server-harness.ts';

const TOKENS = { alice: 'alice-token-0123456789abcdef', bob: 'bob-token-0123456789abcdef', ops: 'ops-token-0123456789abcdef' };

let harness: ServerHarness;
let base: string;
const runner = gatedRunner();
const { newPage } = browserPages();

beforeAll(async () => {
  harness = await startHarness({ tasks: { run: runner.run }, auth: { tokens: TOKENS, admins: ['ops'] } });
  base = harness.server.url;
}, 60_000);
afterAll(async () => {
  await harness?.cleanup();
});

describe('the dashboard in Chromium', () => {
  it('logs in, and shows a task going from running to completed, its steps appearing as they happen', async () => {
    const page = await newPage();
    await logIn(page, base, TOKENS.alice);
    expect(page.url()).toBe(`${base}/`);
    expect(await page.locator('.who .principal').textContent()).toBe('alice');

    // Started after the list was open: the live list shows it.
    const id = await startTask(base, TOKENS.alice, 'Find sessions without a LAST_EVENT');
    const row = page.locator(`tr[data-task-id="${id}"]`);
    await row.locator('.status-running').waitFor();
    expect(await row.locator('.prompt').textContent()).toBe('Find sessions without a LAST_EVENT');

    await row.locator('a').click();
    await page.locator('#task[data-status="running"]').waitFor();
    // Step 1 ended: its LLM call with its tokens, its tool call with its arguments and result.
    const first = page.locator('.step[data-step="1"]');
    await first.locator('.tool-ok').waitFor();
    expect(await first.locator('.llm').textContent()).toContain('850 in / 40 out tokens');
    expect(await first.locator('.tool-name').textContent()).toBe('grynya__query_graph');
    expect(await first.locator('.args').textContent()).toContain('MATCH (n) RETURN count(n)');
    expect(await first.locator('.result').textContent()).toContain('success');
    expect(await page.locator('.cancel button').isVisible()).toBe(true);
    expect(await page.locator('.step[data-step="3"]').count()).toBe(0);

    runner.open('Find sessions without a LAST_EVENT');
    await page.locator('#task[data-status="completed"]').waitFor();
    const second = page.locator('.step[data-step="2"]');
    expect(await second.locator('.tool-ok .tool-name').textContent()).toBe('grynya__query_graph');
    expect(await second.locator('.tool-error').textContent()).toContain('grynya__drop_graph');
    expect(await second.locator('.tool-error .error').textContent()).toContain('NO_SUCH_TOOL');
    expect(await page.locator('.task-result').textContent()).toBe('The graph holds no sessions without a LAST_EVENT.');
    expect(await page.locator('.cancel').count()).toBe(0);
    const budget = await page.locator('table.budget').textContent();
    expect(budget).toContain('of 6');
    expect(budget).toContain('of 20,000');
    // The log was tailed while the task ran, up to its end.
    await page.locator('#log li .type', { hasText: 'task-end' }).waitFor();
    expect(await page.locator('#log li .type', { hasText: 'tool-error' }).count()).toBe(1);

    const screenshot = await page.screenshot({ fullPage: true });
    expect(screenshot.subarray(1, 4).toString()).toBe('PNG');
    if (process.env.KLYM_SCREENSHOT === '1') writeFileSync(path.resolve(import.meta.dirname, '../docs/dashboard-timeline.png'), screenshot);
  });

  it('cancels a running task from its page', async () => {
    const page = await newPage();
    await logIn(page, base, TOKENS.alice);
    const id = await startTask(base, TOKENS.alice, 'A task to cancel');
    await page.goto(`${base}/dashboard/tasks/${id}`);
    await page.locator('.step[data-step="1"] .tool-ok').waitFor();

    await page.locator('.cancel button').click();
    await page.locator('#task[data-status="cancelled"]').waitFor();
    expect(await page.locator('.cancel-reason').textContent()).toBe('cancelled on the dashboard by alice');
    expect(await taskStatus(base, TOKENS.alice, id)).toMatchObject({ status: 'cancelled', cancel_reason: 'cancelled on the dashboard by alice' });
  });

  it("refuses another principal's task: not in the list, and its page is not found; an admin sees it", async () => {
    const bobs = await startTask(base, TOKENS.bob, "Bob's own task");
    const alices = await startTask(base, TOKENS.alice, "Alice's own task");
    const page = await newPage();
    await logIn(page, base, TOKENS.alice);
    await page.locator(`tr[data-task-id="${alices}"]`).waitFor();
    expect(await page.locator(`tr[data-task-id="${bobs}"]`).count()).toBe(0);

    const response = await page.goto(`${base}/dashboard/tasks/${bobs}`);
    expect(response?.status()).toBe(404);
    expect(await page.locator('h1').textContent()).toBe('Not found');
    expect(await page.locator('main').textContent()).not.toContain("Bob's own task");

    // Alice cannot cancel it either: the form's POST, from her own page, finds no such task.
    const cancel = await page.evaluate(async (id) => (await fetch(`/dashboard/tasks/${id}/cancel`, { method: 'POST' })).status, bobs);
    expect(cancel).toBe(404);
    expect(await taskStatus(base, TOKENS.bob, bobs)).toMatchObject({ status: 'running' });

    const admin = await newPage();
    await logIn(admin, base, TOKENS.ops);
    const row = admin.locator(`tr[data-task-id="${bobs}"]`);
    await row.waitFor();
    expect(await row.textContent()).toContain('bob');
    await row.locator('a').click();
    await admin.locator('.step[data-step="1"]').waitFor();
    expect(await admin.locator('.facts').textContent()).toContain('bob');
    for (const prompt of ["Bob's own task", "Alice's own task"]) runner.open(prompt);
  });

  it('shows the upstreams: state, breaker, sessions and calls', async () => {
    const page = await newPage();
    await logIn(page, base, TOKENS.bob);
    await page.locator('nav a', { hasText: 'Upstreams' }).click();
    const grynya = page.locator('tr[data-upstream="grynya"]');
    await grynya.waitFor();
    expect(await grynya.locator('.state-ready').textContent()).toBe('ready');
    expect(await grynya.locator('.breaker-closed').textContent()).toBe('closed');
    // The tasks above called grynya on this process's pool (tasks run inline here).
    const cells = await grynya.locator('td.num').allTextContents();
    expect(Number(cells[3]?.replace(/,/g, ''))).toBeGreaterThan(0);
    expect(cells[6]).toMatch(/\d+(\.\d)? (ms|s)$/);
  });
});
