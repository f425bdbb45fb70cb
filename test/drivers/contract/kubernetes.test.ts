import { describeContractOf } from "./run-contract";

// The backend contract on the `kubernetes` driver (drivers.ts has its testbed).
describeContractOf("kubernetes");
