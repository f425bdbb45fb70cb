import { type Berth, createBerth, type CreateBerthOptions } from "@/server/composition/berth";
import { closeProcessBerth, installProcessBerth } from "@/server/composition/process-berth";
import { loadConfig } from "@/server/config/config";

/**
 * Makes a Berth over a harness' engine or queues this process' root, as `npm start` installs its own
 * (createBerth over the environment, with `options` used instead of what it would build). The root held
 * until now is closed first; `closeProcessBerth()` undoes it (the next use builds a plain one again).
 */
export async function installTestBerth(options: CreateBerthOptions): Promise<Berth> {
  await closeProcessBerth();
  return installProcessBerth(createBerth(loadConfig(), options));
}
