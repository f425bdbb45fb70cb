import { describeBackendContract } from "./backend-contract";
import { CONTRACT_DRIVERS } from "./drivers";

/**
 * The backend contract on one driver of the table (drivers.ts). One test file per driver, so vitest runs
 * the drivers' contracts side by side (one file runs its tests one after the other; together they took
 * 300 s in one file): `<name>.test.ts` here is this call with the driver's name.
 */
export function describeContractOf(name: string): void {
  const driver = CONTRACT_DRIVERS[name];
  if (!driver) throw new Error(`no contract testbed named ${name} in test/drivers/contract/drivers.ts`);
  driver.describe(driver.title, () => describeBackendContract(name, () => driver.setup(), driver.options));
}
