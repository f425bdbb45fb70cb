import { createHash } from "node:crypto";
import { AppError } from "@/server/shared/errors";
import type { DriverContext, MachineResource, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import { withTenantSettings, ZE2bTenantSettings, type E2bDriverConfig } from "./e2b-config";
import { parseHandle } from "./e2b-naming";
import { E2bSandboxes } from "./e2b-sandboxes";

/** Enough for every tenant of a large installation; beyond it the oldest entries are rebuilt on use. */
const MAX_CACHED_TEAMS = 256;

/**
 * The E2B teams this driver works in: the installation's (its E2B_API_KEY) and those of tenants that set
 * their own key or template (server/modules/backend-settings). A tenant's workspaces are provisioned,
 * attached, stopped and purged with its settings, read on every such call so a change applies to the next
 * one; reconcile lists every team's sandboxes.
 */
export class E2bTeams {
  readonly installation: E2bSandboxes;
  private readonly teams = new Map<string, E2bSandboxes>();

  constructor(
    private readonly config: E2bDriverConfig,
    private readonly context: DriverContext,
  ) {
    this.installation = new E2bSandboxes(config, context);
  }

  /** The sandboxes of the tenant's team: its settings over the installation's, else the installation's. */
  async forTenant(tenantId: string): Promise<E2bSandboxes> {
    const raw = await this.context.tenantSettings?.forTenant("e2b", tenantId);
    if (!raw) return this.installation;
    const parsed = ZE2bTenantSettings.safeParse(raw);
    if (!parsed.success) {
      throw new AppError("UNPROCESSABLE", `tenant ${tenantId} has invalid E2B settings`, {
        userMessage: "This tenant's E2B settings are invalid: an admin can fix them in Settings.",
        details: { issues: parsed.error.issues.map((issue) => issue.path.join(".")) },
      });
    }
    const config = withTenantSettings(this.config, parsed.data);
    const key = createHash("sha256").update(JSON.stringify(config)).digest("hex");
    let team = this.teams.get(key);
    if (!team) {
      if (this.teams.size >= MAX_CACHED_TEAMS) this.teams.delete(this.teams.keys().next().value!);
      team = new E2bSandboxes(config, this.context);
      this.teams.set(key, team);
    }
    return team;
  }

  /**
   * The team of a workspace's sandbox: a warm pool machine (a handle with `pool`) is always in the
   * installation's team, whatever the tenant set since; any other, the tenant's team as it is now.
   */
  async forSpec(spec: WorkspaceSpec): Promise<E2bSandboxes> {
    return parseHandle(spec.handle)?.pool !== undefined ? this.installation : this.forTenant(spec.tenantId);
  }

  /** Every team's sandboxes of this installation (a sandbox seen through two settings counts once). */
  async listResources(): Promise<MachineResource[]> {
    const tenants = (await this.context.tenantSettings?.tenants("e2b")) ?? [];
    const teams = new Set([this.installation, ...(await Promise.all(tenants.map((t) => this.forTenant(t))))]);
    const found = new Map<string, MachineResource>();
    for (const team of teams) {
      for (const resource of await team.listResources()) found.set(resource.locator, resource);
    }
    return [...found.values()];
  }

  /**
   * Reaps through the team of the tenant the sandbox's metadata names, then the installation's: a bound
   * pool machine is there even when its tenant has its own team now (sandbox ids are unique across teams,
   * and each team's reap finds nothing of another).
   */
  async reap(resource: MachineResource): Promise<void> {
    const team = resource.tenantId ? await this.forTenant(resource.tenantId) : this.installation;
    await team.reap(resource);
    if (team !== this.installation) await this.installation.reap(resource);
  }
}
