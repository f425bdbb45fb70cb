import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {
  instantiateDriver,
  type BackendHandle,
  type TenantDriverSettings,
  type WorkspaceDriver,
  type WorkspaceSpec,
} from "@/server/workspace/drivers/driver";
import type { InstallationIdSource } from "@/server/workspace/drivers/installation";
import { e2bDriver } from "@/server/workspace/drivers/e2b/driver";
import { ZE2bDriverConfig, type E2bDriverConfigInput } from "@/server/workspace/drivers/e2b/e2b-config";
import type { E2bEmulator, E2bEmulatorOptions } from "../../../fixtures/e2b-emulator/e2b-emulator";
import { withEmulator } from "./e2b-env";

export type DriverTestbed = {
  emulator: E2bEmulator;
  basedir: string;
  /**
   * A driver over the emulator, as a fresh process would build it (overrides merged into the config;
   * `installationId`: the installation's id, used when `installation` is overridden to undefined;
   * `tenantSettings`: tenants' own E2B settings, as the composition reads them from the database).
   */
  newDriver(
    overrides?: Partial<E2bDriverConfigInput>,
    installationId?: InstallationIdSource,
    tenantSettings?: TenantDriverSettings,
  ): WorkspaceDriver;
  spec(workspaceId?: string, handle?: BackendHandle | null): WorkspaceSpec;
  cleanup(): Promise<void>;
};

export async function createDriverTestbed(
  base: Partial<E2bDriverConfigInput> = {},
  emulatorOptions: E2bEmulatorOptions = {},
): Promise<DriverTestbed> {
  const emulator = await withEmulator(emulatorOptions);
  const basedir = await fs.mkdtemp(path.join(os.tmpdir(), "berth-e2b-"));
  const drivers: WorkspaceDriver[] = [];
  const newDriver = (
    overrides: Partial<E2bDriverConfigInput> = {},
    installationId?: InstallationIdSource,
    tenantSettings?: TenantDriverSettings,
  ) => {
    // Through the same path as boot: env → configFromEnv → schema → create.
    const fromEnv = e2bDriver.configFromEnv(
      {
        E2B_API_KEY: emulator.apiKey,
        E2B_DOMAIN: emulator.domain,
        BERTH_E2B_API_URL: emulator.url,
        BERTH_E2B_SANDBOX_URL: emulator.url,
        BERTH_E2B_INSTALLATION: "berth-test",
        BERTH_WORKSPACE_IDLE_TTL_MS: "600000",
      },
      { basedir, cwd: process.cwd(), uid: process.getuid?.() ?? -1 },
    ) as Record<string, unknown>;
    const config = ZE2bDriverConfig.parse({ ...fromEnv, ...base, ...overrides });
    const driver = instantiateDriver(e2bDriver, config, {
      basedir,
      cwd: process.cwd(),
      uid: process.getuid?.() ?? -1,
      ...(installationId ? { installationId } : {}),
      ...(tenantSettings ? { tenantSettings } : {}),
    });
    drivers.push(driver);
    return driver;
  };
  const spec = (workspaceId = `w${randomBytes(6).toString("hex")}`, handle: BackendHandle | null = null) => ({
    workspaceId,
    tenantId: "tenant-test",
    userId: "user-test",
    agentId: "agent-test",
    isolation: "per_agent" as const,
    handle,
  });
  return {
    emulator,
    basedir,
    newDriver,
    spec,
    cleanup: async () => {
      for (const driver of drivers) await driver.close?.();
      await emulator.close();
      await fs.rm(basedir, { recursive: true, force: true });
    },
  };
}
