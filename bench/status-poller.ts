// Grynya's polls, from a process of their own as Grynya's would be: `check_task_status` on the task the
// parent names (IPC `{ taskId }`), every 20 ms, on its own MCP session; on `stop` it answers the round
// trips it measured, each with when it began (milliseconds since the epoch, to compare across processes).
// Run in its own process, the figures hold no queueing in the benchmark's client, which is busy starting
// tasks. Given the Klym child's floor endpoint (argv[3]), it also asks that halfway between two polls: the
// same kind of round trip to a thread that does nothing else, for what the machine allows at that moment.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [mcpUrl = '', floorUrl] = process.argv.slice(2);
const poller = new Client({ name: 'bench-poller', version: '1.0.0' });
await poller.connect(new StreamableHTTPClientTransport(new URL(mcpUrl)));
let latest: string | undefined;
const stopping = new AbortController();
const polls = { times: [] as number[], began: [] as number[] };
const floor = { times: [] as number[], began: [] as number[] };
process.on('message', (message: { taskId?: string; stop?: boolean }) => {
  if (message.taskId !== undefined) latest = message.taskId;
  if (message.stop === true) stopping.abort();
});
process.send?.({ ready: true });
const sleep = (milliseconds: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, milliseconds));
const timed = async (into: { times: number[]; began: number[] }, ask: () => Promise<unknown>): Promise<void> => {
  const asked = performance.now();
  await ask();
  into.times.push(performance.now() - asked);
  into.began.push(performance.timeOrigin + asked);
};
while (!stopping.signal.aborted) {
  if (latest !== undefined) await timed(polls, () => poller.callTool({ name: 'check_task_status', arguments: { task_id: latest } }));
  if (floorUrl === undefined || latest === undefined) {
    await sleep(20);
    continue;
  }
  await sleep(10);
  await timed(floor, () => fetch(floorUrl).then((response) => response.text()));
  await sleep(10);
}
await poller.close();
process.send?.({ ...polls, floor }, () => process.exit(0));
