// Issue #40's figure: from a caller's answer to a waiting task (`reply_to_agent_task`) to the next model call of
// the run it resumes. The task's model is the local fake OpenAI endpoint (test/support/fake-llm-server.ts) in this
// process, so both ends are read on one clock: the reply sent, and the resumed run's request arriving at the fake.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { startFakeLlmServer, type FakeLlmServer } from '../test/support/fake-llm-server.ts';

/** The model the asking tasks name, and its provider settings for Klym's server options. */
export const ASKING_MODEL = 'openai:gpt-4.1-mini';

/** Tasks that ask once, answered as fast as the bench can: how long each resume took to reach the model. */
export interface InputResume {
  /** `tasks.models` and `tasks.providers` for the server the asking tasks run on. */
  readonly taskOptions: { readonly models: readonly string[]; readonly providers: { readonly openai: { readonly apiKey: string; readonly baseURL: string } } };
  /** One sample: starts an asking task over `client`, waits until it waits, answers it; ms from the reply to the resumed model call. */
  sample(client: Client): Promise<number>;
  close(): Promise<void>;
}

const ANSWER_MARK = 'bench-answer-';

const payloadOf = (answer: unknown): Record<string, unknown> =>
  ((answer as { structuredContent?: Record<string, unknown> }).structuredContent ?? {}) as Record<string, unknown>;

/** Starts the fake model: each task's first call asks its caller; a call whose conversation holds the answer ends the run. */
export async function startInputResume(): Promise<InputResume> {
  const resumed = new Map<string, (at: number) => void>();
  const llm: FakeLlmServer = await startFakeLlmServer(({ body }) => {
    const answered = new RegExp(`${ANSWER_MARK}(\\d+)`).exec(body)?.[1];
    if (answered === undefined) return { kind: 'turn', toolCalls: [{ name: 'klym__ask_caller', args: { question: 'Which service?' } }] };
    resumed.get(answered)?.(performance.now());
    return { kind: 'turn', text: 'Done.' };
  });
  let samples = 0;
  return {
    taskOptions: { models: ['scripted', ASKING_MODEL], providers: { openai: { apiKey: 'sk-bench-key-for-the-fake-0000', baseURL: llm.openaiBaseUrl } } },
    async sample(client) {
      const mark = String(++samples);
      const started = await client.callTool({ name: 'start_async_agent_task', arguments: { prompt: `Errors of yesterday #${mark}`, model: ASKING_MODEL } });
      const taskId = String(payloadOf(started).task_id);
      for (;;) {
        const status = payloadOf(await client.callTool({ name: 'check_task_status', arguments: { task_id: taskId } })).status;
        if (status === 'input_required') break;
        if (status !== 'pending' && status !== 'running') throw new Error(`The asking task ${taskId} ended as ${String(status)} before it asked`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const reached = new Promise<number>((resolve) => resumed.set(mark, resolve));
      const began = performance.now();
      const replied = await client.callTool({ name: 'reply_to_agent_task', arguments: { task_id: taskId, answer: `${ANSWER_MARK}${mark}` } });
      if (replied.isError === true) throw new Error(`reply_to_agent_task failed: ${JSON.stringify(replied.content)}`);
      const at = await reached;
      resumed.delete(mark);
      return at - began;
    },
    close: () => llm.close(),
  };
}
