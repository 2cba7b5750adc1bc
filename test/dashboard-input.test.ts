// Issue #40 on the dashboard, in a real browser (Debian's headless Chromium, driven by playwright-core): a task
// whose run asks its caller shows the question on its page, its owner answers in the form there, and the task
// goes on and completes with the answer; the timeline shows the question asked and the answer given. Another
// principal, an admin, sees the question but no form; a POST from another site is refused.
import type { AgentRunner } from '@klym/core';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asker, QUESTION, writer } from './support/asking.ts';
import { browserPages, logIn, startTask, taskStatus } from './support/dashboard.ts';
import { startHarness, type ServerHarness } from './support/server-harness.ts';

const TOKENS = { alice: 'alice-token-0123456789abcdef', ops: 'ops-token-0123456789abcdef' };
/** A task whose prompt starts with "Record" writes into the graph; any other asks its caller. */
const runner: AgentRunner = (options) => (options.prompt.startsWith('Record') ? writer(options) : asker(options));

/** Starts a task that writes into the graph, its add_node waiting for its caller's approval. */
async function startWriting(token: string, prompt: string): Promise<string> {
  const response = await fetch(`${base}/api/tasks`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt, tools: { approval: ['grynya__add_node'] } }),
  });
  if (response.status !== 202) throw new Error(`Starting a task answered ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { task_id: string }).task_id;
}

let harness: ServerHarness;
let base: string;
/** Posts the reply form `form` to task `id` from `page` (its session, its origin), as the page's own form would. */
const postReply = (page: Page, id: string, form: Record<string, string>): Promise<{ status: number; text: string }> =>
  page.evaluate(
    async ([target, body]) => {
      const response = await fetch(`/dashboard/tasks/${target}/reply`, { method: 'POST', body: new URLSearchParams(body) });
      return { status: response.status, text: await response.text() };
    },
    [id, form] as const,
  );

const { newPage } = browserPages();

beforeAll(async () => {
  harness = await startHarness({ tasks: { run: runner }, auth: { tokens: TOKENS, admins: ['ops'] } });
  base = harness.server.url;
}, 60_000);
afterAll(async () => {
  await harness?.cleanup();
});

describe('a task waiting for its caller, on the dashboard in Chromium', () => {
  it('shows the question; its owner answers it in the page, and the task goes on and completes with the answer', async () => {
    const page = await newPage();
    await logIn(page, base, TOKENS.alice);
    const id = await startTask(base, TOKENS.alice, 'Why did errors rise yesterday?');
    await page.goto(`${base}/dashboard/tasks/${id}`);
    await page.locator('#task[data-status="input_required"]').waitFor();
    expect(await page.locator('.ask h2').textContent()).toBe('Waiting for your answer');
    expect(await page.locator('.ask .question').textContent()).toBe(QUESTION);
    await page.locator('.timeline .note-input-required').waitFor();
    expect(await page.locator('.timeline .note-input-required').textContent()).toContain(`Asked its caller: ${QUESTION}`);

    // Typed slowly, across the page's refreshes (each second): what is being written is not replaced.
    await page.locator('.ask textarea[name=answer]').pressSequentially('billing, since the deploy', { delay: 60 });
    expect(await page.locator('.ask textarea[name=answer]').inputValue()).toBe('billing, since the deploy');
    await page.locator('.ask form.reply button[type=submit]').click();

    await page.locator('#task[data-status="completed"]').waitFor({ timeout: 20_000 });
    expect(await page.locator('.task-result').textContent()).toBe('Looking at {"type":"text","value":"billing, since the deploy"}');
    expect(await page.locator('.ask').count()).toBe(0);
    const answered = page.locator('.timeline .note-input-answered');
    expect(await answered.textContent()).toContain('Its caller answered (25 characters)');
    // The timeline keeps the order: the question, then the answer, then the run that went on.
    const notes = await page.locator('.timeline > li.note').evaluateAll((items) => items.map((item) => item.className.replace('note note-', '')));
    expect(notes.indexOf('input-required')).toBeLessThan(notes.indexOf('input-answered'));
    expect(notes.indexOf('input-answered')).toBeLessThan(notes.lastIndexOf('task-end'));
    expect(await taskStatus(base, TOKENS.alice, id)).toMatchObject({ status: 'completed' });

    // Answered once: the same form sent again is refused, saying why.
    const again = await postReply(page, id, { answer: 'search' });
    expect(again.status).toBe(409);
    expect(again.text).toContain('already answered');
  });

  it('shows an admin the question without the form, refuses an empty answer and a reply from another site', async () => {
    const id = await startTask(base, TOKENS.alice, 'Which errors?');
    const admin = await newPage();
    await logIn(admin, base, TOKENS.ops);
    await admin.goto(`${base}/dashboard/tasks/${id}`);
    await admin.locator('#task[data-status="input_required"]').waitFor();
    expect(await admin.locator('.ask .question').textContent()).toBe(QUESTION);
    expect(await admin.locator('.ask form').count()).toBe(0);
    // Not the admin's to answer: the reply is refused as for a task it does not own.
    expect((await postReply(admin, id, { answer: 'billing' })).status).toBe(404);

    const owner = await newPage();
    await logIn(owner, base, TOKENS.alice);
    const empty = await postReply(owner, id, { answer: '  ' });
    expect(empty.status).toBe(400);
    expect(empty.text).toContain('`answer`: write an answer');
    // A decision is for an approval; this task asked a question. And a decision is approve or deny.
    const decided = await postReply(owner, id, { decision: 'approve', reason: 'fine' });
    expect(decided.status).toBe(400);
    expect(decided.text).toContain('waits for an answer to its question');
    const maybe = await postReply(owner, id, { decision: 'maybe' });
    expect(maybe.status).toBe(400);
    expect(maybe.text).toContain('`decision`: expected &quot;approve&quot; or &quot;deny&quot;');

    // The session cookie is SameSite=Strict; a form posted from another origin is refused by its Origin too.
    const cookies = await owner.context().cookies();
    const crossSite = await fetch(`${base}/dashboard/tasks/${id}/reply`, {
      method: 'POST',
      headers: { Origin: 'https://evil.example', Cookie: cookies.map((cookie) => `${cookie.name}=${cookie.value}`).join('; ') },
      body: new URLSearchParams({ answer: 'billing' }),
    });
    expect(crossSite.status).toBe(403);
    expect(await taskStatus(base, TOKENS.alice, id)).toMatchObject({ status: 'input_required', question: QUESTION });
  });

  it('shows a call waiting for approval with its tool and arguments; Approve sends it, Deny with a reason tells the model why', async () => {
    const page = await newPage();
    await logIn(page, base, TOKENS.alice);
    const approved = await startWriting(TOKENS.alice, 'Record why db-3 stopped');
    await page.goto(`${base}/dashboard/tasks/${approved}`);
    await page.locator('#task[data-status="input_required"] .ask[data-kind="approval"]').waitFor();
    expect(await page.locator('.ask h2').textContent()).toBe('Waiting for your approval');
    expect(await page.locator('.ask .ask-tool').textContent()).toBe('grynya__add_node');
    expect(JSON.parse((await page.locator('.ask .ask-args').textContent()) ?? '')).toMatchObject({
      node_type: 'Analysis',
      node_data: { full_text: 'db-3 ran out of disk' },
    });
    await page.locator('.timeline .note-input-required').waitFor();
    expect(await page.locator('.timeline .note-input-required').textContent()).toContain("Waiting for its caller's approval of grynya__add_node");
    expect(harness.grynya.stats.calls.add_node ?? 0).toBe(0);

    await page.locator('.ask input[name=reason]').fill('checked with ops');
    await page.locator('.ask button[value=approve]').click();
    await page.locator('#task[data-status="completed"]').waitFor({ timeout: 20_000 });
    expect(await page.locator('.task-result').textContent()).toContain('success');
    expect(harness.grynya.stats.calls.add_node).toBe(1);
    expect(await page.locator('.timeline .note-input-answered').textContent()).toContain('Its caller approved the call');

    const denied = await startWriting(TOKENS.alice, 'Record why db-4 stopped');
    await page.goto(`${base}/dashboard/tasks/${denied}`);
    await page.locator('.ask[data-kind="approval"] button[value=deny]').waitFor();
    await page.locator('.ask input[name=reason]').fill('not in the graph today');
    await page.locator('.ask button[value=deny]').click();
    await page.locator('#task[data-status="completed"]').waitFor({ timeout: 20_000 });
    expect(await page.locator('.task-result').textContent()).toContain('Denied by the caller: not in the graph today. The call was not sent.');
    expect(harness.grynya.stats.calls.add_node).toBe(1);
    expect(await page.locator('.timeline .note-input-answered').textContent()).toContain('Its caller denied the call');
    expect(await taskStatus(base, TOKENS.alice, denied)).toMatchObject({ status: 'completed' });
  });
});
