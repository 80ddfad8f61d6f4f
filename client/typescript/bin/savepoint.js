#!/usr/bin/env node
// `npx savepoint`: the savepoint binary of the installed platform package (launch.js).
import { launch } from "./launch.js";

launch("savepoint");
