#!/usr/bin/env node
// `npx savepointd`: the savepointd binary of the installed platform package (launch.js).
import { launch } from "./launch.js";

launch("savepointd");
