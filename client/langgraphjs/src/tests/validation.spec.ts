/**
 * @langchain/langgraph-checkpoint-validation in full against SavepointSaver
 * on a real savepointd, through the package's documented initializer
 * (initializer.ts) and its validate(), run by vitest (its CLI of 1.1.1 cannot
 * load an initializer: its runner misses findPackageRoot).
 */
import { validate } from "@langchain/langgraph-checkpoint-validation";

import initializer from "./initializer.js";

validate(initializer);
