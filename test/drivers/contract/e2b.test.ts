import { describeContractOf } from "./run-contract";

// The backend contract on the `e2b` driver (drivers.ts has its testbed).
describeContractOf("e2b");
