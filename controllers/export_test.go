package controllers

// GoalCommand answers one /goal, for the tests.
var GoalCommand = goalCommand
