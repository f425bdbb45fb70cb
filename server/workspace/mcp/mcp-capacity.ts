import type { McpSpecs } from "@/server/workspace/mcp/mcp-file";
import type { LiveMcpClient, TMcpDeclaration } from "@/server/workspace/mcp/types";

/** Live clients per scope key, then per MCP name. What the registry's bookkeeping decides about them. */
export type LiveInstances = Map<string, Map<string, LiveMcpClient>>;

export type EvictionVictim = { live: Map<string, LiveMcpClient>; instance: [string, LiveMcpClient] };

/** Live instances across all scopes (only stateful ones: those count against the cap). */
export function countLive(instances: LiveInstances, options: { statefulOnly?: boolean } = {}): number {
  let count = 0;
  for (const live of instances.values()) {
    if (!options.statefulOnly) {
      count += live.size;
      continue;
    }
    for (const client of live.values()) if (client.declaration.is_stateful) count += 1;
  }
  return count;
}

/**
 * The reference's choice of what the capacity loop closes (agentscope-spec.md §2.6): among the scopes
 * other than the requester's that hold a live stateful instance, the least recently used one (ties: the
 * first in iteration order), and in it the stateful instance declared first. Null when only the requester
 * holds stateful instances (the caller is never evicted).
 */
export function pickEvictionVictim(
  instances: LiveInstances,
  requester: string,
  scopes: { lastUsed: ReadonlyMap<string, number>; declaredNames: (key: string) => string[] },
): EvictionVictim | null {
  let best: (EvictionVictim & { used: number }) | null = null;
  for (const [key, live] of instances) {
    if (key === requester) continue;
    // "First inserted" in the reference, which starts MCPs one by one in declaration order; the registry
    // starts them concurrently, so declaration order is the stable equivalent.
    const declaredOrder = scopes.declaredNames(key);
    const stateful = [...live].filter(([, client]) => client.declaration.is_stateful);
    if (stateful.length === 0) continue;
    const rank = (name: string) => {
      const index = declaredOrder.indexOf(name);
      return index === -1 ? declaredOrder.length : index;
    };
    const instance = stateful.reduce((first, candidate) =>
      rank(candidate[0]) < rank(first[0]) ? candidate : first,
    );
    const used = scopes.lastUsed.get(key) ?? 0;
    // Strictly smaller: ties keep the first scope in iteration order, as the reference does.
    if (!best || used < best.used) best = { live, instance, used };
  }
  return best;
}

/**
 * Live instances a change of the declarations (another process rewrote `.mcp`) leaves without their
 * declaration, or with a different one. An instance whose name was not declared before either is being
 * started by `add` right now (it declares it once connected) and is left alone.
 */
export function outdatedInstances(
  instances: LiveInstances,
  declaredIn: (key: string, specs: McpSpecs) => TMcpDeclaration[],
  change: { before: McpSpecs; after: McpSpecs },
): Array<{ live: Map<string, LiveMcpClient>; name: string; client: LiveMcpClient }> {
  const outdated: Array<{ live: Map<string, LiveMcpClient>; name: string; client: LiveMcpClient }> = [];
  for (const key of new Set([...change.before.keys(), ...change.after.keys()])) {
    const live = instances.get(key);
    if (!live) continue;
    const had = new Set(declaredIn(key, change.before).map((declaration) => declaration.name));
    const wanted = new Map(
      declaredIn(key, change.after).map((declaration) => [declaration.name, declaration]),
    );
    for (const [name, client] of live) {
      if (!had.has(name)) continue;
      const declaration = wanted.get(name);
      if (declaration && JSON.stringify(declaration) === JSON.stringify(client.declaration)) continue;
      outdated.push({ live, name, client });
    }
  }
  return outdated;
}
