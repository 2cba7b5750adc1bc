import { failureOf } from '../tools/tool-result.ts';
import type { CatalogUpstream } from '../tools/tool-catalog.ts';
import type { ResolvedProbe } from '../tools/tool-probe.ts';
import type { LanguageModelCallOptions, LanguageModelPromptMessage, ScriptedStep } from './language-model.ts';

/** What the self-check says when every upstream listed its tools and answered its probe. */
export const SELF_CHECK_OK = 'Бачу базу та інструменти, полет нормальний';

/** What `runAgent` tells a model about the run beside the tools it offers: `providerOptions.klym`. */
export interface RunContext {
  readonly upstreams: Readonly<Record<string, CatalogUpstream>>;
  readonly probes: Readonly<Record<string, ResolvedProbe>>;
}

const PROBE_ID = 'self-check-';
const PREVIEW = 200;

/**
 * The scripted model's default script, decided from what a model sees: first it calls each upstream's
 * probe (all in one step); once the results are in the prompt it reports. Only when every upstream listed
 * its tools and its probe succeeded (no `isError`, no JSON `"status":"error"`) does the report start
 * with {@link SELF_CHECK_OK}; otherwise it names what failed.
 */
export function selfCheckStep(options: LanguageModelCallOptions): ScriptedStep {
  const context = options.providerOptions?.klym as RunContext | undefined;
  const visible = new Set((options.tools ?? []).flatMap((tool) => (tool.type === 'function' ? [tool.name] : [])));
  if (context === undefined) {
    return { text: `Self-check failed: no run context; I see ${visible.size} tools but not which upstreams they come from.` };
  }
  const results = probeResults(options.prompt);
  const calls = Object.entries(context.probes).flatMap(([upstream, probe]) =>
    probe.ok && visible.has(probe.toolName) ? [{ toolCallId: `${PROBE_ID}${upstream}`, toolName: probe.toolName, args: probe.args }] : [],
  );
  // No words with the probes: the run's text is then the report alone.
  if (results.size === 0 && calls.length > 0) return { toolCalls: calls };
  return { text: report(context, visible, results) };
}

function report(context: RunContext, visible: ReadonlySet<string>, results: ReadonlyMap<string, ProbeOutcome>): string {
  const lines: string[] = [];
  const failures: string[] = [];
  for (const [upstream, listing] of Object.entries(context.upstreams)) {
    if (!listing.ok) {
      lines.push(`- ${upstream}: unavailable: ${listing.error}`);
      failures.push(`${upstream} is unavailable`);
      continue;
    }
    const available = [...visible].filter((name) => name.startsWith(`${upstream}__`)).length;
    const probe = context.probes[upstream];
    let line = `- ${upstream}: ${listing.toolCount} tools listed, ${available} available to this run; `;
    if (probe === undefined || !probe.ok) {
      line += `no probe: ${probe?.reason ?? 'none resolved'}`;
      failures.push(`${upstream} has no probe`);
    } else {
      const call = `${probe.toolName} ${JSON.stringify(probe.args)}`;
      const outcome = results.get(upstream);
      if (outcome === undefined) {
        line += `probe ${call} gave no result`;
        failures.push(`${upstream}'s probe gave no result`);
      } else if (outcome.failure !== undefined) {
        line += `probe ${call} failed: ${clip(outcome.failure)}`;
        failures.push(`${upstream}'s probe failed: ${clip(outcome.failure)}`);
      } else {
        line += `probe ${call} → ok: ${clip(outcome.text)}`;
      }
    }
    lines.push(line);
  }
  if (lines.length === 0) failures.push('no upstreams are configured');
  const head = failures.length === 0 ? `${SELF_CHECK_OK}.` : `Self-check failed: ${failures.join('; ')}.`;
  return [head, '', 'Upstreams:', ...lines].join('\n');
}

interface ProbeOutcome {
  readonly text: string;
  readonly failure: string | undefined;
}

/** The probes' results in the prompt since the last user message (an earlier check's are stale), by upstream. */
function probeResults(prompt: readonly LanguageModelPromptMessage[]): Map<string, ProbeOutcome> {
  const outcomes = new Map<string, ProbeOutcome>();
  for (const message of prompt) {
    if (message.role === 'user') outcomes.clear();
    if (message.role !== 'tool') continue;
    for (const part of message.content) {
      if (part.type !== 'tool-result' || !part.toolCallId.startsWith(PROBE_ID)) continue;
      const output = part.output;
      let text: string;
      let isError = false;
      switch (output.type) {
        case 'text':
          text = output.value;
          break;
        case 'error-text':
          text = output.value;
          isError = true;
          break;
        case 'json':
          text = JSON.stringify(output.value);
          break;
        case 'error-json':
          text = JSON.stringify(output.value);
          isError = true;
          break;
        case 'execution-denied':
          text = output.reason ?? 'execution denied';
          isError = true;
          break;
        default:
          text = output.value.map((item) => (item.type === 'text' ? item.text : `[${item.type}]`)).join('\n');
      }
      outcomes.set(part.toolCallId.slice(PROBE_ID.length), { text, failure: failureOf(text, isError) });
    }
  }
  return outcomes;
}

const clip = (text: string): string => {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= PREVIEW ? flat : `${flat.slice(0, PREVIEW - 1)}…`;
};
