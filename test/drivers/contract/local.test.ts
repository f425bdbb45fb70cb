import { describeContractOf } from "./run-contract";

// The backend contract on the `local` driver (drivers.ts has its testbed).
describeContractOf("local");
