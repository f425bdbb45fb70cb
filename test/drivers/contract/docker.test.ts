import { describeContractOf } from "./run-contract";

// The backend contract on the `docker` driver (drivers.ts has its testbed).
describeContractOf("docker");
