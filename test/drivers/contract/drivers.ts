import { dockerContract } from "../docker/contract-testbed";
import { e2bContract } from "../e2b/contract-testbed";
import { kubernetesContract } from "../kubernetes/contract-testbed";
import { localContract } from "../local/contract-testbed";
import { throwawayContract } from "@/test/fixtures/throwaway-driver/contract-testbed";
import type { ContractDriver } from "./backend-contract";

/**
 * Every driver the contract runs against, by driver name: `<name>.test.ts` beside this file runs the whole
 * contract on its entry (one file per driver, so they run side by side). A driver's testbed (its emulator, env and config) lives in its own folder,
 * test/drivers/<name>/contract-testbed.ts; adding a driver is that file, one line here and a one-line
 * `<name>.test.ts`.
 */
export const CONTRACT_DRIVERS: Readonly<Record<string, ContractDriver>> = {
  local: localContract,
  docker: dockerContract,
  e2b: e2bContract,
  kubernetes: kubernetesContract,
  // A kind no product code names (test/fixtures/throwaway-driver): the registry is the only place kinds live.
  throwaway: throwawayContract,
};
