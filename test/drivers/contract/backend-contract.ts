import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { WorkspaceDriver, WorkspaceSpec } from "@/server/workspace/drivers/driver";
import type { WorkspaceMachine } from "@/server/workspace/drivers/port";
import { registerCheckpointCases } from "./cases/checkpoints";
import { registerExecCases } from "./cases/exec";
import { registerFileCases } from "./cases/files";
import { registerLifecycleCases } from "./cases/lifecycle";
import { registerPreviewCases } from "./cases/previews";
import { registerPtyCases } from "./cases/pty";
import { registerWorkspaceCases } from "./cases/workspace";
import { everythingFixture, type EverythingFixture } from "./support";

/**
 * The backend contract (issue 10): what every workspace driver must do, checked through the driver seam
 * only (DriverDefinition → WorkspaceDriver: its facts, the operations on machines, the live WorkspaceMachine), the way the
 * workers and the API use it. Expectations follow `driver.capabilities`, never the driver's name or kind.
 * README.md in this folder says what a new backend must pass and how to add it to the table (drivers.ts).
 */
export type ContractTestbed = {
  /**
   * A driver from the same definition and config, as a freshly started process builds it (each call a NEW
   * instance: the reattach and liveness cases use one as "another process / a restart").
   */
  newDriver(): WorkspaceDriver;
  /** A spec for a new workspace id (no handle yet). Ids must be unique per call. */
  spec(workspaceId: string): WorkspaceSpec;
  /** Removes everything the testbed made (basedir, emulators); the suite purges its own workspaces first. */
  cleanup(): Promise<void>;
};

/** What the cases share: filled in by the suite's beforeAll. */
export type ContractContext = {
  name: string;
  testbed: ContractTestbed;
  /** The suite's main driver (one "process"). */
  driver: WorkspaceDriver;
  /** Every driver instance made, closed at the end. */
  drivers: WorkspaceDriver[];
  /** The main workspace, provisioned by the machine and attached by the provider (spec carries the handle). */
  spec: WorkspaceSpec;
  backend: WorkspaceMachine;
  mcp: EverythingFixture;
  /** A unique id for this suite's workspaces (reconcile only ever looks at its own). */
  idPrefix: string;
  /** Specs this suite provisioned: purged at the end whatever a case did. */
  created: WorkspaceSpec[];
  /** A new spec under the suite's prefix, recorded for cleanup. */
  newSpec(label: string): WorkspaceSpec;
  /** A fresh driver instance, recorded for closing. */
  freshDriver(): WorkspaceDriver;
  /** Registers a case: `it`, or `it.fails` when the driver file lists it as a known defect. */
  it(title: string, run: () => Promise<void>): void;
};

export type ContractOptions = {
  /**
   * Cases this driver is KNOWN to fail, by the start of their title, each with what is wrong: they run as
   * `it.fails`, so they turn red the day the driver is fixed (and the entry must go). Never a way to skip.
   */
  knownDefects?: Readonly<Record<string, string>>;
};

/**
 * One driver's entry in the contract's table (drivers.ts): how to build its testbed, under its own rule for
 * a missing engine (`describeSandbox` fails in CI without bubblewrap, `describeDocker` without Docker).
 */
export type ContractDriver = {
  describe: (title: string, body: () => void) => void;
  title: string;
  setup(): Promise<ContractTestbed>;
  options?: ContractOptions;
};

export function describeBackendContract(
  name: string,
  setup: () => Promise<ContractTestbed>,
  options: ContractOptions = {},
): void {
  describe(`backend contract: ${name}`, () => {
    const context = { name, drivers: [], created: [] } as unknown as ContractContext;
    const defects = Object.keys(options.knownDefects ?? {});
    const matched = new Set<string>();
    context.it = (title, run) => {
      const defect = defects.find((start) => title.startsWith(start));
      if (defect) matched.add(defect);
      (defect ? it.fails : it)(title, run);
    };
    let serial = 0;

    beforeAll(async () => {
      context.testbed = await setup();
      context.idPrefix = `c${Math.random().toString(36).slice(2, 8)}`;
      context.freshDriver = () => {
        const driver = context.testbed.newDriver();
        context.drivers.push(driver);
        return driver;
      };
      context.newSpec = (label) => {
        serial += 1;
        const spec = context.testbed.spec(`${context.idPrefix}${label}${serial}`);
        context.created.push(spec);
        return spec;
      };
      context.mcp = await everythingFixture();
      context.driver = context.freshDriver();
      const spec = context.newSpec("main");
      const handle = await context.driver.create(spec);
      context.spec = { ...spec, handle };
      context.backend = await context.driver.attach(context.spec);
    });

    afterAll(async () => {
      await context.backend?.close().catch(() => undefined);
      const driver = context.testbed ? context.freshDriver() : null;
      for (const spec of context.created) await driver?.purge(spec).catch(() => undefined);
      for (const driver of context.drivers) await driver.close?.().catch(() => undefined);
      await context.mcp?.cleanup();
      await context.testbed?.cleanup();
    });

    registerLifecycleCases(context);
    registerExecCases(context);
    registerFileCases(context);
    registerWorkspaceCases(context);
    registerPtyCases(context);
    registerPreviewCases(context);
    registerCheckpointCases(context);

    it("lists only known defects that name a case", () => {
      expect(defects.filter((defect) => !matched.has(defect))).toEqual([]);
    });
  });
}
