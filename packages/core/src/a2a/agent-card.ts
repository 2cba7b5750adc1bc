import { A2A_PROTOCOL_VERSION, type AgentCard, type SecurityRequirement, type SecurityScheme } from '@a2a-js/sdk';
import type { CapabilitiesView } from '../tasks/views/capabilities.ts';
import { metadataUrlsOf, oauthFlowsOf, type AuthorizationServerMetadata } from './oauth-flows.ts';

/** How callers authenticate to the A2A endpoint: the same bearer tokens and OAuth as `/mcp`. */
export interface AgentCardSecurity {
  /** Static bearer tokens (or any bearer access token) are accepted. @default false */
  readonly bearer?: boolean;
  /** OAuth 2.1 access tokens of one authorization server, each operation behind a scope. @default none */
  readonly oauth?: {
    /** The authorization server's issuer identifier. */
    readonly issuer: string;
    /** The scope each operation needs (`klym:start`, `klym:read`, `klym:cancel` by default). */
    readonly scopes: Readonly<Record<'start' | 'read' | 'cancel', string>>;
    /** The issuer's metadata (RFC 8414), which the scheme's `flows` are written from. @default none: the scheme names only its `oauth2MetadataUrl` */
    readonly metadata?: AuthorizationServerMetadata;
  };
}

/** Options of {@link buildAgentCard}. */
export interface AgentCardOptions {
  /** The URL clients reach the JSON-RPC endpoint at (behind a proxy, the proxy's). */
  readonly url: string;
  /** Klym's version, as the MCP server info says it. */
  readonly version: string;
  /** @default 'Klym' */
  readonly name?: string;
  /** Whether `SendStreamingMessage` and `SubscribeToTask` are served. @default false */
  readonly streaming?: boolean;
  /** Whether push notification configs are served (the task service has `push`). @default false */
  readonly pushNotifications?: boolean;
  readonly security?: AgentCardSecurity;
}

/** The id of the card's one skill. */
export const DELEGATE_SKILL_ID = 'delegate-heavy-work';

/** A tool list in a skill's description is capped: a card is fetched often, and the full list is one `describe_capabilities` away. */
const MAX_TOOLS_NAMED = 40;

/** What the public card's skill says of itself: what Klym does, not what it has. */
const PUBLIC_SKILL_DESCRIPTION =
  'Runs an LLM agent over MCP tools until the job is done, as a task you can poll, list and cancel. ' +
  'Authenticated callers read the models, upstreams, tools, policies and limits in the extended card (GetExtendedAgentCard). ' +
  'Message metadata `klym` may carry `model`, `budget` ({ max_steps, max_tokens, max_cost_usd, timeout_ms }), `tools` ({ allow, deny, policy }) and `webhook`, as start_async_agent_task takes them.';

/**
 * Klym's public A2A Agent Card (A2A §8.2, the SDK's `AgentCard`), served without login: Klym, its one skill
 * "delegate heavy work" in general terms, one JSON-RPC interface at `url` speaking protocol 1.0, its security
 * schemes, and `capabilities.extendedAgentCard`, as the inventory (models, upstreams and their state, tools,
 * policies, budgets) is only in {@link buildExtendedAgentCard}'s card, for authenticated callers. Serve it with
 * `AgentCard.toJSON`.
 */
export function buildAgentCard(options: AgentCardOptions): AgentCard {
  const { securitySchemes, securityRequirements } = securityOf(options.security ?? {});
  return {
    name: options.name ?? 'Klym',
    description:
      'Klym runs heavy, tool-using work for other agents as durable tasks: send the whole job as one message, ' +
      'get a task id at once (configuration.returnImmediately), then follow it with GetTask until it completes' +
      (options.pushNotifications === true ? ' (or be told of each transition by push notification)' : '') +
      '; the final answer is its text artifact.',
    supportedInterfaces: [{ url: options.url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: A2A_PROTOCOL_VERSION }],
    provider: undefined,
    version: options.version,
    capabilities: { streaming: options.streaming ?? false, pushNotifications: options.pushNotifications ?? false, extensions: [], extendedAgentCard: true },
    securitySchemes,
    securityRequirements,
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain', 'application/json'],
    skills: [
      {
        id: DELEGATE_SKILL_ID,
        name: 'Delegate heavy work',
        description: PUBLIC_SKILL_DESCRIPTION,
        tags: ['delegation', 'agent', 'tools'],
        examples: ['Find the sessions without a LAST_EVENT in the graph and summarise why each one stopped.'],
        inputModes: ['text/plain'],
        outputModes: ['text/plain', 'application/json'],
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
}

/**
 * The extended Agent Card (A2A §3.1.11, `GetExtendedAgentCard`), for authenticated callers only: the public
 * card ({@link buildAgentCard}) whose skill is described from the same facts `describe_capabilities` answers
 * (models, upstreams with their live state and tool counts, tool names, policies, budgets), tagged with the
 * upstreams' names.
 */
export function buildExtendedAgentCard(capabilities: CapabilitiesView, options: AgentCardOptions): AgentCard {
  const card = buildAgentCard(options);
  return {
    ...card,
    skills: card.skills.map((skill) => ({
      ...skill,
      description: describeSkill(capabilities),
      tags: [...skill.tags, ...Object.keys(capabilities.upstreams)],
    })),
  };
}

/** What the skill can do here, in prose an orchestrating model reads. */
function describeSkill(capabilities: CapabilitiesView): string {
  const upstreams = Object.entries(capabilities.upstreams).map(([name, upstream]) =>
    upstream.tools === undefined ? `${name} (${upstream.state})` : `${name} (${upstream.state}, ${upstream.tools} tools)`,
  );
  const named = capabilities.tools.slice(0, MAX_TOOLS_NAMED).map((tool) => tool.name);
  const more = capabilities.tools.length - named.length;
  const { max } = capabilities.budget;
  const limits = [
    max.max_steps === undefined ? undefined : `${max.max_steps} steps`,
    max.max_tokens === undefined ? undefined : `${max.max_tokens} tokens`,
    max.max_cost_usd === undefined ? undefined : `$${max.max_cost_usd}`,
    max.timeout_ms === undefined ? undefined : `${Math.round(max.timeout_ms / 1_000)} s`,
  ].filter((limit) => limit !== undefined);
  return [
    'Runs an LLM agent over MCP tools until the job is done, as a task you can poll, list and cancel.',
    `Models: ${capabilities.models.join(', ')} (default ${capabilities.default_model}).`,
    `Upstreams: ${upstreams.length === 0 ? 'none' : upstreams.join(', ')}.`,
    `Tools: ${named.length === 0 ? 'none' : named.join(', ')}${more > 0 ? ` and ${more} more` : ''}.`,
    `Tool policies: ${capabilities.policies.join(', ')}.`,
    `Limits per task: at most ${limits.length === 0 ? 'the server default' : limits.join(', ')}.`,
    'Message metadata `klym` may carry `model`, `budget` ({ max_steps, max_tokens, max_cost_usd, timeout_ms }), `tools` ({ allow, deny, policy }) and `webhook`, as start_async_agent_task takes them.',
  ].join(' ');
}

function securityOf(security: AgentCardSecurity): Pick<AgentCard, 'securitySchemes' | 'securityRequirements'> {
  const securitySchemes: Record<string, SecurityScheme> = {};
  const securityRequirements: SecurityRequirement[] = [];
  if (security.bearer === true || security.oauth !== undefined) {
    securitySchemes['bearer'] = {
      scheme: { $case: 'httpAuthSecurityScheme', value: { description: 'A bearer token, as /mcp takes it', scheme: 'bearer', bearerFormat: '' } },
    };
    securityRequirements.push({ schemes: { bearer: { list: [] } } });
  }
  if (security.oauth !== undefined) {
    const { issuer, scopes, metadata } = security.oauth;
    securitySchemes['oauth2'] = {
      scheme: {
        $case: 'oauth2SecurityScheme',
        value: {
          description: `OAuth 2.1 access tokens of ${issuer}: ${scopes.start} to send, ${scopes.read} to get and list, ${scopes.cancel} to cancel`,
          flows: metadata === undefined ? undefined : oauthFlowsOf(metadata, scopes),
          oauth2MetadataUrl: authorizationServerMetadataUrl(issuer),
        },
      },
    };
    securityRequirements.push({ schemes: { oauth2: { list: [scopes.start, scopes.read, scopes.cancel] } } });
  }
  return { securitySchemes, securityRequirements };
}

/** RFC 8414 §3.1: the well-known suffix goes between the issuer's host and its path. */
const authorizationServerMetadataUrl = (issuer: string): string => metadataUrlsOf(issuer)[0] as string;
