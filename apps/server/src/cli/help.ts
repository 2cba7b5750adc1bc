import type { CommandName } from './parse-command.ts';

const CONFIG_FLAGS = `Configuration: defaults < config file < environment < flags (each overrides the one before)
  -c, --config FILE        YAML or JSON (default: ./klym.config.yaml|yml|json, or $KLYM_CONFIG)
  --set KEY=VALUE          any key: --set server.port=9000 --set tasks.concurrency=8
  --upstream NAME=URL      add an upstream MCP server (repeatable)
  -m, --model MODEL        scripted | openai:gpt-4.1-mini | google:gemini-2.5-flash | compatible:X
  --log-level LEVEL        debug | info | notice | warning | error
  Environment: KLYM_<KEY> (KLYM_SERVER_PORT, KLYM_LLM_MODEL, KLYM_UPSTREAMS as JSON),
  OPENAI_API_KEY, OPENAI_BASE_URL, GOOGLE_GENERATIVE_AI_API_KEY. \`klym config\` shows the result.`;

const TEXTS: Record<'klym' | CommandName, string> = {
  klym: `klym — the worker an orchestrating agent hands heavy work to, over MCP

Usage: klym <command> [options]

Commands:
  serve            serve Klym's task tools over MCP (Streamable HTTP /mcp, legacy SSE /sse)
  serve --stdio    the same to one client over stdin/stdout
  worker           run tasks from the queue that fronts share on Redis (tasks.store: redis://…)
  run "PROMPT"     one agent run in the foreground, no server; prints the result as JSON
  config           print the effective configuration, secrets redacted, each value's source
  help [COMMAND]   this text, or a command's

Without a command, \`pnpm start\` runs the embedded default (no key, no outside server).
Run \`klym <command> --help\` for a command's options.`,

  serve: `Usage: klym serve [--stdio] [options]

Serves start_async_agent_task, check_task_status, cancel_agent_task, list_agent_tasks and
describe_capabilities over MCP (Streamable HTTP /mcp, legacy HTTP+SSE /sse), the REST API
(/api/tasks), GET /healthz and GET /metrics (Prometheus). Keeps tasks in .klym/tasks.db under
the working directory (tasks.store: memory, or sqlite:<path>), so they survive a restart.
With tasks.store redis://host:port/db, many fronts and workers share the tasks
(tasks.concurrency 0: a front only). Shuts down gracefully on SIGINT/SIGTERM.

Options:
  --stdio                  serve one MCP client over stdin/stdout instead of HTTP
  --host HOST              address to bind (default 127.0.0.1; any other needs server.tokens)
  -p, --port PORT          port (default 8765; 0 picks a free one)
  -h, --help               this help

${CONFIG_FLAGS}`,

  run: `Usage: klym run "PROMPT" [options]

One agent run over the configured upstreams, without a server. The final JSON goes to stdout:
status, text, finishReason, steps, usage, costUsd, toolCalls, model, unavailable (upstreams that
were down). On a terminal, progress (step, tool being called, tokens so far) goes to stderr;
upstream log messages and a line per unavailable upstream always go to stderr.

Exit status: 0 the run ended (a budget too: see finishReason; an upstream that is down does not
end a run: the model is told); 1 a usage or configuration error; 2 the run failed: the model or
Klym itself (stdout: {"status":"error",…}); 130 interrupted by SIGINT/SIGTERM (partial result).

Options:
  --system-prompt TEXT     system prompt template; {{tools}} becomes the tool list
  --max-steps N            budget: LLM steps (default 25)
  --max-tokens N           budget: total tokens
  --max-cost-usd N         budget: cost in USD (needs a price for the model)
  --timeout-ms N           budget: wall-clock time
  --allow PATTERN          only tools matching (repeatable; * is a wildcard)
  --deny PATTERN           never tools matching (repeatable)
  --policy NAME            read-only, or a policy from the configuration
  --progress               show progress on stderr even when it is not a terminal
  --no-progress            never show progress
  -h, --help               this help

${CONFIG_FLAGS}`,

  worker: `Usage: klym worker [options]

Runs tasks from the queue that \`klym serve\` fronts share on Redis: tasks.store must be
redis://[user:password@]host:port/db (rediss:// for TLS). Runs up to tasks.concurrency tasks at
once; a worker that dies has its tasks taken over by another within about
tasks.lockDurationMs + 2 × tasks.stalledIntervalMs (50 s by default). Serves only GET /healthz
and GET /metrics, on worker.host:worker.port. On SIGINT/SIGTERM it takes no new task, lets
running ones finish within tasks.shutdownGraceMs, and hands the rest back to another worker.

Options:
  --host HOST              address of the health endpoint (default 127.0.0.1)
  -p, --port PORT          its port (default 8766; 0 picks a free one)
  -h, --help               this help

${CONFIG_FLAGS}`,

  config: `Usage: klym config [--json] [options]

Prints the effective configuration as YAML, every secret redacted, each value followed by its
source (default, file …, env …, flag …). An invalid configuration exits 1 with one line naming
the key, the fault and the source.

Options:
  --json                   JSON: { "config": …, "sources": { "server.port": "flag --port", … } }
  -h, --help               this help
  Also every flag of \`klym serve\` and \`klym run\` that sets a key (--port, --max-steps, …),
  to show what that command line would use.

${CONFIG_FLAGS}`,
};

/** The help text of `klym`, or of one command. */
export function helpText(topic: CommandName | undefined): string {
  return `${TEXTS[topic ?? 'klym']}\n`;
}
