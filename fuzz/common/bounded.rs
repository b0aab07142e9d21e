//! A planned scenario cut to a fuzzing budget: loads of at most 2,000 requests and a request
//! budget of 50,000 per load step, and 1,000 instants a step (a wait of years through a
//! deadline that fires every minute fails at the budget in a fraction of a second), so that a run costs milliseconds while every extreme
//! count is still parsed and planned.

use canarysim::load::Amount;
use canarysim::scenario::Plan;
use canarysim::scenario::plan::StepKind;

pub fn bounded(mut plan: Plan) -> Plan {
    plan.request_budget = 50_000;
    plan.instant_budget = 1_000;
    for step in &mut plan.steps {
        if let StepKind::Load(w) = &mut step.kind {
            if let Amount::Requests(n) = &mut w.amount {
                *n = (*n).min(2_000);
            }
        }
    }
    plan
}
