import { runAgent, type AgentRunner } from '@klym/core';
import { createScriptedModel, type ScriptedStep } from '@klym/core/internal';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll } from 'vitest';

/** Debian's Chromium (scripts/run.sh installs it): playwright's own browser download does not work on our machines. */
export const CHROMIUM = '/usr/bin/chromium';

/** Headless Chromium, without what would reach outside the machine. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

/**
 * Headless Chromium for one test file: launched before its tests, each test's pages closed after it, the
 * browser at the end. `newPage()`: a page of a fresh profile (no cookies), 1280 pixels wide.
 */
export function browserPages(): { newPage(): Promise<Page> } {
  let browser: Browser | undefined;
  const contexts: BrowserContext[] = [];
  beforeAll(async () => {
    browser = await launchChromium();
  }, 60_000);
  afterEach(async () => {
    await Promise.all(contexts.splice(0).map((context) => context.close()));
  });
  afterAll(async () => {
    await browser?.close();
  });
  return {
    async newPage() {
      const context = await browser!.newContext({ viewport: { width: 1280, height: 900 } });
      contexts.push(context);
      return context.newPage();
    },
  };
}

/** Logs in on the dashboard's form with `token`, from wherever the server sent the browser. */
export async function logIn(page: Page, baseUrl: string, token: string): Promise<void> {
  await page.goto(`${baseUrl}/`);
  await page.locator('#token').fill(token);
  await page.locator('form[action="/dashboard/login"] button[type=submit]').click();
  await page.locator('#task-list').waitFor();
}

/** A runner whose tasks wait, after their first step, until the test opens their gate. */
export interface GatedRunner {
  readonly run: AgentRunner;
  /** Lets the task with this prompt go on to its last steps. */
  open(prompt: string): void;
}

/**
 * The real runAgent with the scripted model: step 1 says what it does and queries grynya; step 2 waits
 * for the test to open the task's gate (or for the task's cancel), then makes two calls, one to a tool
 * that does not exist; step 3 answers. Each step reports its tokens, as a provider would.
 */
export function gatedRunner(): GatedRunner {
  const gates = new Map<string, PromiseWithResolvers<void>>();
  const gate = (prompt: string): PromiseWithResolvers<void> => {
    let found = gates.get(prompt);
    if (found === undefined) {
      found = Promise.withResolvers<void>();
      gates.set(prompt, found);
    }
    return found;
  };
  const waitFor = (prompt: string, signal: AbortSignal | undefined): Promise<void> =>
    new Promise((resolve, reject) => {
      const abort = (): void => reject(signal?.reason);
      if (signal?.aborted) return abort();
      signal?.addEventListener('abort', abort, { once: true });
      void gate(prompt).promise.then(() => {
        signal?.removeEventListener('abort', abort);
        resolve();
      });
    });
  const run: AgentRunner = (options) => {
    const steps = async ({ call, options: callOptions }: { call: number; options: { abortSignal?: AbortSignal } }): Promise<ScriptedStep> => {
      if (call === 1) {
        return {
          text: 'Counting the nodes of the graph first.',
          toolCalls: [{ toolName: 'grynya__query_graph', args: { query: 'MATCH (n) RETURN count(n)' } }],
          usage: { inputTokens: 850, outputTokens: 40 },
        };
      }
      if (call === 2) {
        await waitFor(options.prompt, callOptions.abortSignal);
        return {
          toolCalls: [
            { toolName: 'grynya__query_graph', args: { query: 'RETURN 1' } },
            { toolName: 'grynya__drop_graph', args: { confirm: true } },
          ],
          usage: { inputTokens: 1_210, outputTokens: 64 },
        };
      }
      return { text: 'The graph holds no sessions without a LAST_EVENT.', usage: { inputTokens: 1_480, outputTokens: 96 } };
    };
    return runAgent({ ...options, model: createScriptedModel({ steps }) });
  };
  return { run, open: (prompt) => gate(prompt).resolve() };
}

/** Starts a task over the REST API as the principal of `token`; resolves its id. */
export async function startTask(baseUrl: string, token: string, prompt: string): Promise<string> {
  const response = await fetch(`${baseUrl}/api/tasks`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt, budget: { max_steps: 6, max_tokens: 20_000 } }),
  });
  if (response.status !== 202) throw new Error(`Starting a task answered ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { task_id: string }).task_id;
}

/** A task's status over the REST API. */
export async function taskStatus(baseUrl: string, token: string, id: string): Promise<Record<string, unknown>> {
  const response = await fetch(`${baseUrl}/api/tasks/${id}`, { headers: { Authorization: `Bearer ${token}` } });
  return (await response.json()) as Record<string, unknown>;
}
