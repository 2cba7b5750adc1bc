// A reference A2A 1.0 agent built only from @a2a-js/sdk's own server (DefaultRequestHandler, InMemoryTaskStore,
// push store and sender, the Express JSON-RPC and card handlers), for the conformance kit to be run against beside
// Klym (scripts/a2a-tck.ts --reference): what fails on both is the kit's or the SDK's, what fails on Klym alone is
// Klym's to explain. It plays the kit's scenarios Klym plays (scenarios/core_operations.feature): a message whose
// messageId starts with `tck-input-required` asks for input (TASK_STATE_INPUT_REQUIRED), any other completes its
// task with the text artifact "Hello from TCK" — as Klym's script has its fake model do. Run alone:
//   node --conditions=klym-source scripts/a2a-reference-agent.ts   (prints its URL; Ctrl-C stops it)
import { createRequire } from 'node:module';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AgentCard, Role, TaskState, type Message, type Part, type TaskStatus } from '@a2a-js/sdk';
import {
  AgentEvent,
  DefaultPushNotificationSender,
  DefaultRequestHandler,
  InMemoryPushNotificationStore,
  InMemoryTaskStore,
  type AgentExecutor,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

/** The messageId prefix by which the kit asks an agent for a task that waits for input. */
const INPUT_REQUIRED_PREFIX = 'tck-input-required';

// Express is the SDK's peer, installed beside it: reached through the SDK's own resolution rather than a dependency of ours.
const express = createRequire(import.meta.resolve('@a2a-js/sdk/server/express'))('express') as () => {
  use(path: string, handler: unknown): void;
  listen(port: number, host: string, callback: () => void): Server;
};

const textPart = (text: string): Part => ({ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const agentMessage = (taskId: string, contextId: string, text: string): Message => ({
  messageId: crypto.randomUUID(),
  taskId,
  contextId,
  role: Role.ROLE_AGENT,
  parts: [textPart(text)],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const status = (state: TaskState, message?: Message): TaskStatus => ({ state, message, timestamp: new Date().toISOString() });

/** Asks when the message says so, else answers "Hello from TCK" as the task's artifact and completes it. */
const executor: AgentExecutor = {
  async execute(context, bus) {
    const { taskId, contextId, userMessage } = context;
    if (context.task === undefined) {
      bus.publish(
        AgentEvent.task({ id: taskId, contextId, status: status(TaskState.TASK_STATE_SUBMITTED), artifacts: [], history: [userMessage], metadata: undefined }),
      );
    }
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_WORKING), metadata: undefined }));
    if (userMessage.messageId.startsWith(INPUT_REQUIRED_PREFIX)) {
      const question = agentMessage(taskId, contextId, 'TCK: what next?');
      bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_INPUT_REQUIRED, question), metadata: undefined }));
    } else {
      const artifact = { artifactId: 'result', name: 'result', description: '', parts: [textPart('Hello from TCK')], metadata: undefined, extensions: [] };
      bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, artifact, append: false, lastChunk: true, metadata: undefined }));
      bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: status(TaskState.TASK_STATE_COMPLETED), metadata: undefined }));
    }
    bus.finished();
  },
  async cancelTask(taskId, bus) {
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId: '', status: status(TaskState.TASK_STATE_CANCELED), metadata: undefined }));
    bus.finished();
  },
};

/** A running reference agent. */
export interface ReferenceAgent extends AsyncDisposable {
  /** `http://127.0.0.1:<port>`: the card at `/.well-known/agent-card.json`, JSON-RPC at `/a2a`. */
  readonly url: string;
  close(): Promise<void>;
}

/** Starts the reference agent on a loopback port. */
export async function startReferenceAgent(): Promise<ReferenceAgent> {
  const app = express();
  const server = await new Promise<Server>((resolve) => {
    const listening: Server = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  // The routes are mounted once the port is known, so the card names where it is.
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const card = AgentCard.fromJSON({
    name: 'A2A reference agent (@a2a-js/sdk)',
    description: 'Built from @a2a-js/sdk alone, to compare conformance results with Klym',
    version: '1.0.0',
    supportedInterfaces: [{ url: `${url}/a2a`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
    capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: false },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [{ id: 'echo', name: 'Echo', description: 'Completes a task, or asks for input when told to', tags: ['tck'] }],
  });
  const pushStore = new InMemoryPushNotificationStore();
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor, undefined, pushStore, new DefaultPushNotificationSender(pushStore));
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
  app.use('/a2a', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  const close = async (): Promise<void> => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return { url, close, [Symbol.asyncDispose]: close };
}

if (import.meta.main) {
  const agent = await startReferenceAgent();
  console.log(`A2A reference agent at ${agent.url}`);
  process.once('SIGINT', () => void agent.close());
}
