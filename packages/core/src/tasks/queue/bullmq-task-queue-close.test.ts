// Closing a shared queue whose cancel channel is reconnecting: nothing may reject unhandled (Node's default,
// `--unhandled-rejections=throw`, kills a process of it while it shuts down).
import { createServer, connect, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { redisCommand, startRedisServer } from '../../../../../test/support/redis-server.ts';
import { createBullmqTaskQueue } from './bullmq-task-queue.ts';
import type { TaskConsumer } from './task-queue.ts';

const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
beforeAll(() => void process.on('unhandledRejection', onUnhandled));
afterAll(() => void process.off('unhandledRejection', onUnhandled));

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).toReversed()) await cleanup();
});

/** A front's consumer: it runs nothing. */
const front: TaskConsumer = {
  concurrency: 0,
  run: async () => 'left',
  cancel: async () => {},
  interrupt: async () => {},
  hasEnded: async () => false,
  heardElsewhere: () => {},
};

/**
 * A TCP proxy to Redis that can hold back Redis's answer to the ready check (`INFO`) of the next connection
 * made through it until the client has ended its side: the answer then arrives after the client let go.
 */
interface HoldingProxy {
  readonly port: number;
  /** Holds the next connection's answers from its `INFO` on; resolves once that `INFO` was sent. */
  holdNext(): Promise<void>;
  close(): Promise<void>;
}

async function startHoldingProxy(redisPort: number): Promise<HoldingProxy> {
  let onHeld: (() => void) | undefined;
  const sockets = new Set<Socket>();
  const server: Server = createServer({ allowHalfOpen: true }, (client) => {
    const upstream = connect(redisPort, '127.0.0.1');
    sockets.add(client).add(upstream);
    const hold = onHeld;
    onHeld = undefined;
    let holding = false;
    const answers: Buffer[] = [];
    client.on('data', (chunk: Buffer) => {
      if (hold !== undefined && !holding && /\$4\r\ninfo\r\n/i.test(chunk.toString())) {
        holding = true;
        hold();
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => (holding ? answers.push(chunk) : client.write(chunk)));
    // The client let go: what Redis answered meanwhile (or answers still) reaches it now, then Redis's end.
    client.on('end', () => {
      holding = false;
      for (const chunk of answers.splice(0)) client.write(chunk);
      upstream.end();
    });
    upstream.on('end', () => client.end());
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy has no port');
  return {
    port: address.port,
    holdNext: () => new Promise<void>((resolve) => (onHeld = resolve)),
    async close() {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

describe('closing a shared task queue', () => {
  it('leaves no promise rejected unhandled when its cancel channel is let go between connecting and being ready', async () => {
    const redis = await startRedisServer();
    cleanups.push(() => redis.close());
    const proxy = await startHoldingProxy(redis.port);
    cleanups.push(() => proxy.close());
    const name = `close${process.pid}`;
    const queue = await createBullmqTaskQueue({ url: `redis://127.0.0.1:${proxy.port}/0`, name });
    cleanups.push(() => queue.close({ graceMs: 0 }));
    queue.open(front);
    // Subscribed: a message on its channel has one receiver.
    await expect.poll(() => redisCommand(redis.port, 'PUBLISH', `klym:bull:${name}:events`, 'hello'), { timeout: 5_000 }).toBe(':1');

    // The channel's connection is cut and comes back, but Redis's answer to its ready check only arrives once
    // the queue is closed: ioredis then makes the connection ready (and subscribes it again) on a socket let go.
    const reconnected = proxy.holdNext();
    expect(await redisCommand(redis.port, 'CLIENT', 'KILL', 'TYPE', 'pubsub')).toBe(':1');
    await reconnected;
    await queue.close({ graceMs: 0 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(unhandled.map((reason) => (reason instanceof Error ? reason.message : String(reason)))).toEqual([]);
  });

  it('subscribes its cancel channel again by itself when the connection was cut while open', async () => {
    const redis = await startRedisServer();
    cleanups.push(() => redis.close());
    const name = `again${process.pid}`;
    const queue = await createBullmqTaskQueue({ url: redis.url, name });
    cleanups.push(() => queue.close({ graceMs: 0 }));
    queue.open(front);
    const receivers = (): Promise<string> => redisCommand(redis.port, 'PUBLISH', `klym:bull:${name}:cancel`, 'no-such-task');
    await expect.poll(receivers, { timeout: 5_000 }).toBe(':1');
    expect(await redisCommand(redis.port, 'CLIENT', 'KILL', 'TYPE', 'pubsub')).toBe(':1');
    expect(await receivers()).toBe(':0');
    await expect.poll(receivers, { timeout: 5_000 }).toBe(':1');
  });
});
