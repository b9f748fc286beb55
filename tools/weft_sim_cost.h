/*
 * weft_sim_cost.h — `weft-sim cost`: AllReduce on a described cluster of up
 * to thousands of hosts, priced by replaying the real schedules through the
 * tuner's cost model (algorithms/cost.h). weft_sim_check.c's main hands it
 * the command line from the word "cost" on.
 */
#ifndef WEFT_SIM_COST_H
#define WEFT_SIM_COST_H

// argv[0] is the subcommand's name ("cost"); the options follow (--help
// lists them). Returns the exit status: 0 done (points the model could not
// price are listed as such), 1 out of memory or threads, or the tuner set a
// slice other than the one priced; 2 bad usage.
int weft_sim_cost_main(int argc, char **argv);

#endif
