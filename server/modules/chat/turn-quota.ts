import type { TenantScope } from "@/server/auth/scope";
import type { UsageInput } from "@/server/modules/metering/metering.types";
import type { SessionDTO } from "@/server/modules/session/session.types";
import type { TurnAdmission } from "@/server/modules/quota/quota.service";
import type { TurnResult } from "@/server/agent/agent-loop";

/**
 * What the chat service needs from quotas and metering: a turn is admitted (budget, one of the tenant's
 * concurrent-turn slots) before it claims its session, and its usage is buffered once it ended.
 */
export type TurnQuotaPort = {
  admitTurn(tenantId: string, turnId: string): Promise<TurnAdmission>;
  /** How often a running turn renews its slot. */
  renewEveryMs: number;
  recordUsage(entries: readonly UsageInput[]): Promise<void>;
};

/** The ledger entries of one finished turn: the turn, its tokens and its tool calls, fully attributed. */
export function turnUsage(
  scope: TenantScope,
  session: SessionDTO,
  result: Pick<TurnResult, "usage">,
  facts: { toolCalls: number; backend: string | null; workspaceId: string | null },
): UsageInput[] {
  const base = {
    tenantId: scope.tenantId,
    backend: facts.backend,
    agentId: session.agentId,
    sessionId: session.id,
    userId: session.userId ?? scope.userId ?? null,
    workspaceId: facts.workspaceId,
  };
  return [
    { ...base, kind: "turn", quantity: 1 },
    { ...base, kind: "input_tokens", quantity: result.usage.inputTokens },
    { ...base, kind: "output_tokens", quantity: result.usage.outputTokens },
    { ...base, kind: "tool_call", quantity: facts.toolCalls },
  ];
}
